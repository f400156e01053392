package probe

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteTable writes the human table: one line per check, then, for every
// check that did not pass, the spec's words and what the peer did.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintf(tw, "CHECK\tSECTION\tVERDICT\tWHAT THE PEER DID\n")
	for _, x := range r.Results {
		v := string(x.Verdict)
		if x.Name != "" {
			v += " (" + x.Name + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", x.ID, x.Section, v, x.Summary)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, x := range r.Results {
		if x.Verdict == Pass || x.Verdict == Skipped {
			continue
		}
		fmt.Fprintf(w, "\n%s %s: %s\n", x.Verdict, x.ID, x.Title)
		fmt.Fprintf(w, "  spec (%s): %s\n", x.Section, x.Rule)
		fmt.Fprintf(w, "  at step %q the reference answers %q; the peer: %q\n", x.Step, x.Expected, x.Observed)
		if x.Explain != "" {
			fmt.Fprintf(w, "  %s\n", x.Explain)
		}
	}
	c := r.Counts()
	_, err := fmt.Fprintf(w, "\n%d checks: %d PASS, %d DEVIATION, %d NOT-SUPPORTED, %d SKIPPED (%.1f s)\n",
		len(r.Results), c[Pass], c[Deviation], c[NotSupported], c[Skipped], r.Duration.Seconds())
	return err
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(rd io.Reader) (*Report, error) {
	var r Report
	dec := json.NewDecoder(rd)
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("probe: reading the report: %w", err)
	}
	return &r, nil
}

// Note explains one check's result in a conformance document: why the
// peer behaves as it does, citing its source or the spec. The verdict and
// name must match the report's, so that a changed behaviour cannot keep an
// old explanation.
type Note struct {
	Check   string
	Verdict Verdict
	Name    string // the result's Name ("" when it has none)
	Text    string
}

// ParseNotes reads notes, one per paragraph:
//
//	check-id VERDICT [name]
//	explanation, any number of lines
//
// separated by blank lines; lines starting with # are comments.
func ParseNotes(rd io.Reader) ([]Note, error) {
	b, err := io.ReadAll(rd)
	if err != nil {
		return nil, err
	}
	var notes []Note
	var cur *Note
	for n, line := range strings.Split(string(b), "\n") {
		line = strings.TrimRight(line, " \t\r")
		switch {
		case strings.HasPrefix(line, "#"):
			continue
		case line == "":
			cur = nil
		case cur == nil:
			f := strings.Fields(line)
			if len(f) < 2 || len(f) > 3 {
				return nil, fmt.Errorf("notes line %d: want \"check VERDICT [name]\", got %q", n+1, line)
			}
			notes = append(notes, Note{Check: f[0], Verdict: Verdict(f[1])})
			cur = &notes[len(notes)-1]
			if len(f) == 3 {
				cur.Name = f[2]
			}
		default:
			if cur.Text != "" {
				cur.Text += " "
			}
			cur.Text += strings.TrimSpace(line)
		}
	}
	return notes, nil
}

// WriteMarkdown writes a conformance document for the report: the table
// and, for every result that is not a plain PASS, its explanation from
// notes. Only what is stable from run to run goes in (no times, no ids).
// Every such result needs a note whose verdict and name match, and every
// note a result: otherwise WriteMarkdown fails, and writes nothing.
func (r *Report) WriteMarkdown(w io.Writer, title, intro string, notes []Note) error {
	var sb strings.Builder
	byCheck := map[string]Note{}
	for _, n := range notes {
		byCheck[n.Check] = n
	}
	used := map[string]bool{}
	fmt.Fprintf(&sb, "# %s\n\n", title)
	if intro != "" {
		fmt.Fprintf(&sb, "%s\n\n", strings.TrimSpace(intro))
	}
	c := r.Counts()
	fmt.Fprintf(&sb, "%d checks: %d PASS, %d DEVIATION, %d NOT-SUPPORTED, %d SKIPPED.\n\n",
		len(r.Results), c[Pass], c[Deviation], c[NotSupported], c[Skipped])
	sb.WriteString("| check | IBTA Vol 1 | verdict | what the peer did |\n|---|---|---|---|\n")
	for _, x := range r.Results {
		v := "**" + string(x.Verdict) + "**"
		if x.Name != "" {
			v += " (" + x.Name + ")"
		}
		fmt.Fprintf(&sb, "| `%s` %s | %s | %s | %s |\n", x.ID, mdEscape(x.Title), mdEscape(x.Section), v, mdEscape(x.Summary))
	}
	var problems []string
	first := true
	for _, x := range r.Results {
		n, ok := byCheck[x.ID]
		if x.Verdict == Pass && x.Name == "" && !ok {
			continue
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("%s: %s%s has no note", x.ID, x.Verdict, nameSuffix(x.Name)))
			continue
		}
		used[x.ID] = true
		if n.Verdict != x.Verdict || n.Name != x.Name {
			problems = append(problems, fmt.Sprintf("%s: the note is for %s%s, the result is %s%s", x.ID,
				n.Verdict, nameSuffix(n.Name), x.Verdict, nameSuffix(x.Name)))
			continue
		}
		if first {
			sb.WriteString("\n## Why\n")
			first = false
		}
		fmt.Fprintf(&sb, "\n### `%s`: %s%s\n\n", x.ID, x.Verdict, nameSuffix(x.Name))
		fmt.Fprintf(&sb, "- Spec, IBTA Vol 1 %s: %s.\n", x.Section, x.Rule)
		if x.Verdict != Pass {
			fmt.Fprintf(&sb, "- At step \"%s\" the reference engine answers %s; the peer: %s.\n", x.Step, x.Expected, x.Observed)
		}
		fmt.Fprintf(&sb, "- %s\n", strings.TrimSpace(n.Text))
	}
	sb.WriteString("\n## Every step\n\nWhat each check sent, and what came back; where the peer's answer differs from the reference engine's, the latter follows in brackets.\n")
	for _, x := range r.Results {
		fmt.Fprintf(&sb, "\n- `%s`", x.ID)
		if len(x.Steps) == 0 {
			fmt.Fprintf(&sb, ": %s", x.Summary)
		}
		sb.WriteString("\n")
		for _, st := range x.Steps {
			sent := st.Sent
			if sent == "" {
				sent = "nothing"
			}
			fmt.Fprintf(&sb, "  - %s (sent: %s): %s", st.Name, sent, st.Observed)
			if st.Observed != st.Expected {
				fmt.Fprintf(&sb, " [reference: %s]", st.Expected)
			}
			sb.WriteString("\n")
		}
	}
	for _, n := range notes {
		if !used[n.Check] && !contains(problems, n.Check) {
			problems = append(problems, fmt.Sprintf("%s: a note, but no such result needs one", n.Check))
		}
	}
	if len(problems) > 0 {
		return fmt.Errorf("probe: the notes do not match the report:\n  %s", strings.Join(problems, "\n  "))
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

func contains(problems []string, check string) bool {
	for _, p := range problems {
		if strings.HasPrefix(p, check+":") {
			return true
		}
	}
	return false
}

func nameSuffix(n string) string {
	if n == "" {
		return ""
	}
	return " (" + n + ")"
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

// WriteCatalogue writes the catalogue of checks for a person: each
// check's ID, title, section and rule.
func WriteCatalogue(w io.Writer) error {
	for _, c := range Catalogue() {
		ex := ""
		if c.Exclusive {
			ex = " (runs alone, last)"
		}
		if _, err := fmt.Fprintf(w, "%-20s %s [%s]%s\n    %s\n", c.ID, c.Title, c.Section, ex, c.Rule); err != nil {
			return err
		}
	}
	return nil
}

// Document is the conformance document (WriteMarkdown) of the JSON report
// in report, its results in the catalogue's order, with the notes that
// explain every result other than a plain PASS; title defaults to the
// report's target.
func Document(report, notes io.Reader, title, intro string) ([]byte, error) {
	rep, err := ReadJSON(report)
	if err != nil {
		return nil, err
	}
	ns, err := ParseNotes(notes)
	if err != nil {
		return nil, err
	}
	if title == "" {
		title = rep.Target
	}
	rep.SortByCatalogue()
	var b bytes.Buffer
	if err := rep.WriteMarkdown(&b, title, intro, ns); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
