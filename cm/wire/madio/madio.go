// Package madio reads and writes streams of CM MADs in the forms ibcm's
// tools exchange: the wire's JSON form (one object per MAD), hex lines
// (one 256-byte MAD per line) and pcap files. `ibcm encode` and `ibcm
// decode` are these streams with files around them.
package madio

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"unicode"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cm/wire/pcap"
)

// Decoder writes each MAD it is given as one line of the wire's JSON form
// to W. A MAD that does not decode goes to Bad, with where it came from.
type Decoder struct {
	W   io.Writer
	Bad func(where string, err error)

	mad    wire.MAD
	json   []byte
	failed int
}

// Failed is how many MADs did not decode.
func (d *Decoder) Failed() int { return d.failed }

func (d *Decoder) bad(where string, err error) {
	d.failed++
	if d.Bad != nil {
		d.Bad(where, err)
	}
}

// MAD decodes the MAD b, from where, and writes its JSON line.
func (d *Decoder) MAD(b []byte, where string) {
	if len(b) != wire.MADSize {
		d.bad(where, fmt.Errorf("a MAD is %d bytes, got %d", wire.MADSize, len(b)))
		return
	}
	if err := wire.DecodeMAD(b, &d.mad); err != nil {
		d.bad(where, err)
		return
	}
	var err error
	if d.json, err = d.mad.AppendJSON(d.json[:0]); err != nil {
		d.bad(where, err)
		return
	}
	d.json = append(d.json, '\n')
	_, _ = d.W.Write(d.json)
}

// HexLines decodes the MAD of every line of r, named name: hex, with
// whitespace ignored; empty lines and lines starting with '#' are
// skipped.
func (d *Decoder) HexLines(r io.Reader, name string) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := strings.Map(func(r rune) rune {
			if unicode.IsSpace(r) {
				return -1
			}
			return r
		}, sc.Text())
		if s == "" || strings.HasPrefix(s, "#") {
			continue
		}
		where := fmt.Sprintf("%s:%d", name, line)
		b, err := hex.DecodeString(s)
		if err != nil {
			d.bad(where, fmt.Errorf("bad hex: %w", err))
			continue
		}
		d.MAD(b, where)
	}
	return sc.Err()
}

// Pcap decodes every MAD of the pcap file r, named name (RoCE v2, RoCE
// v1, raw IP or LINKTYPE_INFINIBAND frames to QP1).
func (d *Decoder) Pcap(r io.Reader, name string) error {
	pr, err := pcap.NewReader(r)
	if err != nil {
		return err
	}
	var mad [wire.MADSize]byte
	for {
		err := pr.ReadMAD(&mad)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		d.MAD(mad[:], fmt.Sprintf("%s: frame %d", name, pr.Frames))
	}
}

// Encode encodes every JSON object of r (one per line, or any JSON
// stream) into a MAD and passes it to emit. An object that does not
// encode goes to bad, with its number from 1. Encode returns how many did
// not, and an error that stops the stream (bad JSON syntax, or emit's).
func Encode(r io.Reader, emit func(*[wire.MADSize]byte) error, bad func(obj int, err error)) (int, error) {
	dec := json.NewDecoder(r)
	var m wire.MAD
	var buf [wire.MADSize]byte
	failed := 0
	for obj := 1; ; obj++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return failed, nil
		} else if err != nil {
			return failed, fmt.Errorf("object %d: %w", obj, err)
		}
		err := m.UnmarshalJSON(bytes.TrimSpace(raw))
		if err == nil {
			err = m.Encode(&buf)
		}
		if err != nil {
			failed++
			bad(obj, err)
			continue
		}
		if err := emit(&buf); err != nil {
			return failed, err
		}
	}
}

// HexLine is an emit function for Encode that writes each MAD to w as
// one line of lowercase hex.
func HexLine(w io.Writer) func(*[wire.MADSize]byte) error {
	line := make([]byte, 2*wire.MADSize+1)
	line[len(line)-1] = '\n'
	return func(mad *[wire.MADSize]byte) error {
		hex.Encode(line, mad[:])
		_, err := w.Write(line)
		return err
	}
}

// PcapFrames is an emit function for Encode that writes each MAD to w as
// a RoCE v2 frame of a pcap file, whose header it writes first.
func PcapFrames(w io.Writer) (func(*[wire.MADSize]byte) error, error) {
	pw, err := pcap.NewWriter(w)
	if err != nil {
		return nil, err
	}
	return func(mad *[wire.MADSize]byte) error { return pw.WriteMAD(mad[:]) }, nil
}
