// Package interop runs ibcm against the Linux kernel CM in two QEMU VMs
// (see README.md): the host side builds the images, boots the VMs and
// reads what they print as data. The checks are in interop_test.go (build
// tag interop), run by `make interop`.
package interop

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// A record is one line of the guests' framing (guest.sh): a log begins or
// ends, or a note.
type record struct {
	Frame  string            `json:"frame"`
	VM     string            `json:"vm"`
	Log    string            `json:"log"`
	Msg    string            `json:"msg"`
	RC     *int              `json:"rc"`
	T      *float64          `json:"t"`
	Fields map[string]string `json:"fields"`
}

// Log is the output of one program or file in a VM, between its begin and
// end records.
type Log struct {
	Name  string
	Lines []string
	// RC is the program's exit status; nil when the log has no end or its
	// end gave none.
	RC     *int
	Ended  bool
	Begin  float64 // the VM's uptime at the begin record, in seconds
	End    float64
	Base64 bool
	// Fields are the begin and end records' fields (what the script
	// measured), the end's taking precedence.
	Fields map[string]string
}

// Text is the log's lines, each ended by a newline.
func (l *Log) Text() string {
	if len(l.Lines) == 0 {
		return ""
	}
	return strings.Join(l.Lines, "\n") + "\n"
}

// Bytes decodes a base64 log (a file the VM copied out).
func (l *Log) Bytes() ([]byte, error) {
	if !l.Base64 {
		return []byte(l.Text()), nil
	}
	return base64.StdEncoding.DecodeString(strings.Join(l.Lines, ""))
}

// Note is a note record: something a guest script says outside any
// program's output.
type Note struct {
	Msg    string
	T      float64
	Fields map[string]string
}

// Console is what one VM printed on its console, as data.
type Console struct {
	Logs  map[string]*Log
	Order []string // log names in the order they began
	Notes []Note
	// Other is every line in no log: the kernel's messages, and anything
	// printed outside a log.
	Other []string
}

// ParseConsole reads a VM's console: JSON-line records ({"frame":...},
// each ending its line) and the lines between them. Logs nest: a line belongs to the
// log begun last and not yet ended.
func ParseConsole(r io.Reader) (*Console, error) {
	c := &Console{Logs: map[string]*Log{}}
	var open []*Log
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := strings.TrimRight(sc.Text(), "\r")
		text := func(s string) {
			if len(open) > 0 {
				l := open[len(open)-1]
				l.Lines = append(l.Lines, s)
			} else {
				c.Other = append(c.Other, s)
			}
		}
		// A record may follow other output on its line: a program's last
		// line without its newline, or a kernel message.
		i := strings.Index(line, `{"frame":`)
		if i < 0 {
			text(line)
			continue
		}
		var rec record
		if err := json.NewDecoder(strings.NewReader(line[i:])).Decode(&rec); err != nil {
			// A record cut by another writer: keep it as text.
			c.Other = append(c.Other, line)
			continue
		}
		if i > 0 {
			text(line[:i])
		}
		t := 0.0
		if rec.T != nil {
			t = *rec.T
		}
		switch rec.Frame {
		case "begin":
			name := rec.Log
			for i := 2; c.Logs[name] != nil; i++ {
				// A second log of one name is kept as NAME#2, ... (the
				// checks name every log once).
				name = fmt.Sprintf("%s#%d", rec.Log, i)
			}
			l := &Log{Name: name, Begin: t, Base64: rec.Fields["enc"] == "base64", Fields: map[string]string{}}
			for k, v := range rec.Fields {
				l.Fields[k] = v
			}
			c.Logs[name] = l
			c.Order = append(c.Order, name)
			open = append(open, l)
		case "end":
			for i := len(open) - 1; i >= 0; i-- {
				if strings.SplitN(open[i].Name, "#", 2)[0] == rec.Log {
					open[i].RC, open[i].Ended, open[i].End = rec.RC, true, t
					for k, v := range rec.Fields {
						open[i].Fields[k] = v
					}
					open = append(open[:i], open[i+1:]...)
					break
				}
			}
		case "note":
			c.Notes = append(c.Notes, Note{Msg: rec.Msg, T: t, Fields: rec.Fields})
		default:
			c.Other = append(c.Other, line)
		}
	}
	return c, sc.Err()
}

// Log returns the log NAME, or an empty one (not ended) when the VM
// printed none, so that checks on it fail with their own message.
func (c *Console) Log(name string) *Log {
	if l, ok := c.Logs[name]; ok {
		return l
	}
	return &Log{Name: name}
}

// HasNote reports whether the VM printed the note msg.
func (c *Console) HasNote(msg string) bool {
	for _, n := range c.Notes {
		if n.Msg == msg {
			return true
		}
	}
	return false
}
