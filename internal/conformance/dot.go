package conformance

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
)

// Graph is the reachable state graph TLC dumps with
// -dump dot,actionlabels FILE: states by fingerprint, the initial states
// (drawn filled) and the edges labelled with the action's name.
type Graph struct {
	States map[string]map[string]Value // fingerprint -> variable -> value
	Init   []string
	Edges  []Edge
}

// Edge is one step of the graph.
type Edge struct {
	From, To string
	Action   string
}

// ReadGraphFile reads a dot file, gzip-compressed when its name ends in .gz.
func ReadGraphFile(path string) (*Graph, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		z, err := gzip.NewReader(f)
		if err != nil {
			return nil, err
		}
		defer z.Close()
		r = z
	}
	return ReadGraph(r)
}

// ReadGraph parses TLC's dot output. Each node and edge is on one line:
//
//	FP [label="/\\ x = 1\n/\\ y = {}",style = filled]
//	FP -> FP [label="Action",color="black",fontcolor="black"];
func ReadGraph(r io.Reader) (*Graph, error) {
	g := &Graph{States: map[string]map[string]Value{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	seen := map[Edge]bool{}
	line := 0
	for sc.Scan() {
		line++
		l := sc.Text()
		i := strings.Index(l, " [label=\"")
		if i < 0 {
			continue
		}
		head := l[:i]
		label, rest, err := dotString(l[i+len(" [label="):])
		if err != nil {
			return nil, fmt.Errorf("dot line %d: %w", line, err)
		}
		if from, to, ok := strings.Cut(head, " -> "); ok {
			e := Edge{From: strings.TrimSpace(from), To: strings.TrimSpace(to), Action: label}
			if !seen[e] {
				seen[e] = true
				g.Edges = append(g.Edges, e)
			}
			continue
		}
		fp := strings.TrimSpace(head)
		st, err := ParseState(label)
		if err != nil {
			return nil, fmt.Errorf("dot line %d: %w", line, err)
		}
		g.States[fp] = st
		if strings.Contains(rest, "style = filled") {
			g.Init = append(g.Init, fp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(g.Init) == 0 {
		return nil, fmt.Errorf("dot: no initial state")
	}
	for _, e := range g.Edges {
		if g.States[e.From] == nil || g.States[e.To] == nil {
			return nil, fmt.Errorf("dot: edge %s -> %s names an unknown state", e.From, e.To)
		}
	}
	return g, nil
}

// dotString decodes a double-quoted dot string at the start of s and
// returns it with the rest of s.
func dotString(s string) (string, string, error) {
	if !strings.HasPrefix(s, `"`) {
		return "", "", fmt.Errorf("want a quoted string")
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch c {
		case '"':
			return b.String(), s[i+1:], nil
		case '\\':
			if i+1 >= len(s) {
				return "", "", fmt.Errorf("trailing backslash")
			}
			i++
			switch s[i] {
			case 'n':
				b.WriteByte('\n')
			default:
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	return "", "", fmt.Errorf("unterminated string")
}
