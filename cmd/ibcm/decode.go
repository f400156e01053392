package main

import (
	"bufio"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cm/wire/pcap"
)

func init() {
	register("decode", "decode CM MADs (hex lines or a pcap) into JSON, one object per MAD", runDecode)
}

const decodeUsage = `usage: ibcm decode [FILE...]
       ibcm decode --pcap FILE

Reads 256-byte CM MADs and writes one JSON object per MAD to stdout.
Without --pcap the input (FILEs, or stdin) holds one MAD per line in hex;
whitespace is ignored, and empty lines and lines starting with '#' are
skipped. With --pcap FILE ("-" for stdin) the MADs come from a pcap file
(RoCE v2, RoCE v1, raw IP or LINKTYPE_INFINIBAND frames to QP1).
The JSON form is the one "ibcm encode" reads. Exit status 1 if any MAD
could not be decoded (the others are still written).
`

func runDecode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("decode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, decodeUsage) }
	pcapPath := fs.String("pcap", "", "read MADs from this pcap file (- for stdin)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	d := &madDecoder{out: out, stderr: stderr}

	if *pcapPath != "" {
		if fs.NArg() > 0 {
			fmt.Fprintln(stderr, "ibcm decode: --pcap takes no other input files")
			return 2
		}
		in, closeIn, err := openInput(*pcapPath, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "ibcm decode:", err)
			return 1
		}
		defer closeIn()
		if err := d.pcap(in, *pcapPath); err != nil {
			fmt.Fprintf(stderr, "ibcm decode: %s: %v\n", *pcapPath, err)
			return 1
		}
		return d.status()
	}

	inputs := fs.Args()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	for _, name := range inputs {
		in, closeIn, err := openInput(name, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "ibcm decode:", err)
			return 1
		}
		err = d.hexLines(in, displayName(name))
		closeIn()
		if err != nil {
			fmt.Fprintf(stderr, "ibcm decode: %s: %v\n", displayName(name), err)
			return 1
		}
	}
	return d.status()
}

// madDecoder turns MAD bytes into JSON lines, counting bad MADs.
type madDecoder struct {
	out    *bufio.Writer
	stderr io.Writer
	mad    wire.MAD
	json   []byte
	bad    int
}

func (d *madDecoder) status() int {
	if d.bad > 0 {
		return 1
	}
	return 0
}

// one decodes one MAD and writes its JSON line, or reports where it failed.
func (d *madDecoder) one(b []byte, where string) {
	if len(b) != wire.MADSize {
		fmt.Fprintf(d.stderr, "ibcm decode: %s: a MAD is %d bytes, got %d\n", where, wire.MADSize, len(b))
		d.bad++
		return
	}
	if err := wire.DecodeMAD(b, &d.mad); err != nil {
		fmt.Fprintf(d.stderr, "ibcm decode: %s: %v\n", where, err)
		d.bad++
		return
	}
	var err error
	d.json, err = d.mad.AppendJSON(d.json[:0])
	if err != nil {
		fmt.Fprintf(d.stderr, "ibcm decode: %s: %v\n", where, err)
		d.bad++
		return
	}
	d.out.Write(d.json)
	d.out.WriteByte('\n')
}

func (d *madDecoder) hexLines(in io.Reader, name string) error {
	sc := bufio.NewScanner(in)
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
		b, err := hex.DecodeString(s)
		where := fmt.Sprintf("%s:%d", name, line)
		if err != nil {
			fmt.Fprintf(d.stderr, "ibcm decode: %s: bad hex: %v\n", where, err)
			d.bad++
			continue
		}
		d.one(b, where)
	}
	return sc.Err()
}

func (d *madDecoder) pcap(in io.Reader, name string) error {
	r, err := pcap.NewReader(in)
	if err != nil {
		return err
	}
	var mad [wire.MADSize]byte
	for {
		err := r.ReadMAD(&mad)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		d.one(mad[:], fmt.Sprintf("%s: frame %d", name, r.Frames))
	}
}

// openInput opens a named input; "-" is stdin.
func openInput(name string, stdin io.Reader) (io.Reader, func(), error) {
	if name == "-" {
		return stdin, func() {}, nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	return f, func() { f.Close() }, nil
}

func displayName(name string) string {
	if name == "-" {
		return "stdin"
	}
	return name
}
