package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// maxFuncLines bounds every function of the command: the CLI is a thin
// shell over libraries, and a function longer than this does work that
// belongs in one (or several functions).
const maxFuncLines = 80

// TestNoLongFunctions keeps every function of cmd/ibcm's non-test files,
// and of internal/session's (the machinery of its listen and connect),
// within maxFuncLines lines.
func TestNoLongFunctions(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	machinery, err := filepath.Glob("../../internal/session/*.go")
	require.NoError(t, err)
	require.NotEmpty(t, machinery)
	files = append(files, machinery...)
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			var body *ast.BlockStmt
			what := "a function literal"
			switch x := n.(type) {
			case *ast.FuncDecl:
				body, what = x.Body, x.Name.Name
			case *ast.FuncLit:
				body = x.Body
			}
			if body == nil {
				return true
			}
			lines := fset.Position(body.End()).Line - fset.Position(n.Pos()).Line + 1
			assert.LessOrEqual(t, lines, maxFuncLines, "%s: %s is %d lines", fset.Position(n.Pos()), what, lines)
			return true
		})
	}
}
