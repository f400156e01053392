package engine_test

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

// A tiny datadriven format in the style of etcd raft's interaction tests:
//
//	# comments and blank lines are kept
//	command key=value word
//	optional input lines
//	----
//	expected output (no blank lines)
//
// go test ./cm -run TestScenarios -rewrite regenerates the expected output.

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scenario scripts")

type ddArg struct{ Key, Val string }

type ddCmd struct {
	Pos   string // file:line
	Cmd   string
	Args  []ddArg
	Input string
	Want  string
	lead  []string // comment and blank lines before the command
}

func (c *ddCmd) Has(key string) bool {
	for _, a := range c.Args {
		if a.Key == key {
			return true
		}
	}
	return false
}

func (c *ddCmd) Get(key, def string) string {
	for _, a := range c.Args {
		if a.Key == key {
			return a.Val
		}
	}
	return def
}

// Positional returns the i-th bare word.
func (c *ddCmd) Positional(i int) string {
	n := 0
	for _, a := range c.Args {
		if a.Val == "" && !strings.Contains(a.Key, "=") {
			if n == i {
				return a.Key
			}
			n++
		}
	}
	return ""
}

func parseDD(path string) ([]*ddCmd, []string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	var cmds []*ddCmd
	var lead []string
	sc := bufio.NewScanner(f)
	line := 0
	next := func() (string, bool) {
		if !sc.Scan() {
			return "", false
		}
		line++
		return sc.Text(), true
	}
	for {
		l, ok := next()
		if !ok {
			break
		}
		if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
			lead = append(lead, l)
			continue
		}
		c := &ddCmd{Pos: fmt.Sprintf("%s:%d", path, line), lead: lead}
		lead = nil
		fields := strings.Fields(l)
		c.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			c.Args = append(c.Args, ddArg{k, v})
		}
		var input []string
		for {
			l, ok = next()
			if !ok {
				return nil, nil, fmt.Errorf("%s: missing ----", c.Pos)
			}
			if l == "----" {
				break
			}
			input = append(input, l)
		}
		c.Input = strings.Join(input, "\n")
		var want []string
		for {
			l, ok = next()
			if !ok || strings.TrimSpace(l) == "" {
				if ok {
					lead = append(lead, l)
				}
				break
			}
			want = append(want, l)
		}
		c.Want = strings.Join(want, "\n")
		cmds = append(cmds, c)
	}
	return cmds, lead, sc.Err()
}

// runDD runs every command of the file through run and compares (or, with
// -rewrite, replaces) the expected output.
func runDD(t *testing.T, path string, run func(c *ddCmd) string) {
	t.Helper()
	cmds, tail, err := parseDD(path)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, c := range cmds {
		got := strings.TrimRight(run(c), "\n")
		if !*rewrite && got != c.Want {
			t.Errorf("%s: %s\n--- want\n%s\n--- got\n%s", c.Pos, c.Cmd, c.Want, got)
		}
		for _, l := range c.lead {
			b.WriteString(l + "\n")
		}
		b.WriteString(c.Cmd)
		for _, a := range c.Args {
			b.WriteString(" " + a.Key)
			if a.Val != "" {
				b.WriteString("=" + a.Val)
			}
		}
		b.WriteString("\n")
		if c.Input != "" {
			b.WriteString(c.Input + "\n")
		}
		b.WriteString("----\n")
		if got != "" {
			b.WriteString(got + "\n")
		}
	}
	for _, l := range tail {
		b.WriteString(l + "\n")
	}
	if *rewrite {
		if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
