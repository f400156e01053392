// Package limitsdoc reads the tables of docs/limits.md, so that each
// package's tests can check that the defaults the document states are the
// ones its code uses.
package limitsdoc

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Row is one row of a table: its section (the "## " heading above it),
// its Name cell (without the backquotes of a name that is all code) and
// its Default cell.
type Row struct {
	Section, Name, Default string
}

// Rows returns the rows of every table in docs/limits.md, found from the
// working directory upwards (a package's tests run in its directory).
func Rows() ([]Row, error) {
	path, err := find()
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var rows []Row
	section, header := "", false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			section, header = strings.TrimPrefix(line, "## "), false
		case strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			if !header { // the header row, then the separator row
				header = strings.TrimSpace(cells[0]) == "Name"
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(cells[0]), "---") || len(cells) < 2 {
				continue
			}
			name := strings.TrimSpace(cells[0])
			if strings.Count(name, "`") == 2 && strings.HasPrefix(name, "`") && strings.HasSuffix(name, "`") {
				name = strings.Trim(name, "`") // a field's name
			}
			rows = append(rows, Row{Section: section, Name: name, Default: strings.TrimSpace(cells[1])})
		default:
			header = header && strings.HasPrefix(line, "|")
		}
	}
	return rows, sc.Err()
}

func find() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "docs", "limits.md"), nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", fmt.Errorf("limitsdoc: no go.mod above the working directory")
		}
		dir = up
	}
}

// Check compares the rows of section whose Name starts with prefix with
// want, Name to the text its Default cell must start with, and returns
// one message for each default that differs, each row want lacks, and
// each entry of want the document lacks.
func Check(section, prefix string, want map[string]string) ([]string, error) {
	rows, err := Rows()
	if err != nil {
		return nil, err
	}
	var bad []string
	seen := map[string]bool{}
	for _, r := range rows {
		if r.Section != section || !strings.HasPrefix(r.Name, prefix) {
			continue
		}
		seen[r.Name] = true
		w, ok := want[r.Name]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("%s: %q states %q, which no test checks", section, r.Name, r.Default))
		case !strings.HasPrefix(r.Default, w):
			bad = append(bad, fmt.Sprintf("%s: %q states %q; the code's default is %q", section, r.Name, r.Default, w))
		}
	}
	for name := range want {
		if !seen[name] {
			bad = append(bad, fmt.Sprintf("%s: no row %q", section, name))
		}
	}
	return bad, nil
}

// Thousands formats n with a comma every three digits, as the document
// writes numbers.
func Thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
