// Package codesize measures the repository's hand-written Go code against
// its size rules: no function over MaxFunc lines, none over MaxCMFunc in
// package cm (the one applications import, read most), and no file of
// package cm over MaxCMFile lines. Test files and generated files (those
// with Go's "Code generated ... DO NOT EDIT." line) are not measured.
package codesize

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// The rules.
const (
	MaxFunc   = 120
	MaxCMFunc = 80
	MaxCMFile = 500
)

// CMDir is package cm's directory, relative to the module's root.
const CMDir = "cm"

// Violation is one function or file over its rule.
type Violation struct {
	Path  string // relative to the module's root, slash-separated
	Func  string // "" for a whole file; Recv.Name for a method
	Lines int
	Max   int
}

func (v Violation) String() string {
	if v.Func == "" {
		return fmt.Sprintf("%s: %d lines, over %d", v.Path, v.Lines, v.Max)
	}
	return fmt.Sprintf("%s: %s: %d lines, over %d", v.Path, v.Func, v.Lines, v.Max)
}

// Report is what Check measured: the files and functions it read, and
// those over their rule.
type Report struct {
	Files, Funcs int
	Violations   []Violation
}

// Check measures every hand-written, non-test Go file under root (the
// module's root), skipping the directories the go command ignores
// (testdata, and those starting with "." or "_").
func Check(root string) (*Report, error) {
	r := &Report{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return r.file(filepath.ToSlash(rel), src)
	})
	if err != nil {
		return nil, err
	}
	return r, nil
}

// file measures one file, at rel (slash-separated, from the module's root).
func (r *Report) file(rel string, src []byte) error {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, rel, src, parser.ParseComments|parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	if ast.IsGenerated(f) {
		return nil
	}
	r.Files++
	inCM := path.Dir(rel) == CMDir
	// Lines as wc -l counts them.
	if n := bytes.Count(src, []byte("\n")); inCM && n > MaxCMFile {
		r.Violations = append(r.Violations, Violation{Path: rel, Lines: n, Max: MaxCMFile})
	}
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok {
			continue
		}
		r.Funcs++
		n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
		limit := MaxFunc
		if inCM {
			limit = MaxCMFunc
		}
		if n > limit {
			r.Violations = append(r.Violations, Violation{Path: rel, Func: funcName(fd), Lines: n, Max: limit})
		}
	}
	return nil
}

// funcName is a function's name, a method's as Recv.Name.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	switch x := t.(type) {
	case *ast.IndexExpr: // a generic type's method
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}
