package main

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cm/wire/pcap"
)

func init() {
	register("encode", "encode JSON CM messages into MAD hex lines or a pcap", runEncode)
}

const encodeUsage = `usage: ibcm encode [--pcap FILE] [FILE...]

Reads JSON objects (one per line, or any JSON stream) from the FILEs or
stdin, in the form "ibcm decode" writes, and encodes each into a 256-byte
CM MAD. Writes one lowercase hex line per MAD to stdout, or with --pcap FILE
("-" for stdout) a pcap of RoCE v2 frames that Wireshark opens.

Every key but "type" is optional: absent fields are zero, an absent
"method" is Send (Get for ClassPortInfo). Unknown keys, values that do not
fit their field and private data longer than the message carries are
errors. Exit status 1 if any object could not be encoded.
`

func runEncode(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("encode", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, encodeUsage) }
	pcapPath := fs.String("pcap", "", "write a pcap file instead of hex lines (- for stdout)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}

	out := bufio.NewWriter(stdout)
	defer out.Flush()
	var emit func(mad *[wire.MADSize]byte) error
	if *pcapPath == "" {
		line := make([]byte, 2*wire.MADSize+1)
		line[len(line)-1] = '\n'
		emit = func(mad *[wire.MADSize]byte) error {
			hex.Encode(line, mad[:])
			_, err := out.Write(line)
			return err
		}
	} else {
		var w io.Writer = out
		if *pcapPath != "-" {
			f, err := os.Create(*pcapPath)
			if err != nil {
				fmt.Fprintln(stderr, "ibcm encode:", err)
				return 1
			}
			defer func() {
				if err := f.Close(); err != nil {
					fmt.Fprintln(stderr, "ibcm encode:", err)
				}
			}()
			bw := bufio.NewWriter(f)
			defer bw.Flush()
			w = bw
		}
		pw, err := pcap.NewWriter(w)
		if err != nil {
			fmt.Fprintln(stderr, "ibcm encode:", err)
			return 1
		}
		emit = func(mad *[wire.MADSize]byte) error { return pw.WriteMAD(mad[:]) }
	}

	inputs := fs.Args()
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	bad := 0
	for _, name := range inputs {
		in, closeIn, err := openInput(name, stdin)
		if err != nil {
			fmt.Fprintln(stderr, "ibcm encode:", err)
			return 1
		}
		n, err := encodeStream(in, displayName(name), emit, stderr)
		closeIn()
		bad += n
		if err != nil {
			fmt.Fprintf(stderr, "ibcm encode: %s: %v\n", displayName(name), err)
			return 1
		}
	}
	if bad > 0 {
		return 1
	}
	return 0
}

// encodeStream encodes every JSON object of in. It returns how many objects
// could not be encoded, and an error that stops the stream (bad JSON syntax
// or an output failure).
func encodeStream(in io.Reader, name string, emit func(*[wire.MADSize]byte) error, stderr io.Writer) (int, error) {
	dec := json.NewDecoder(in)
	var m wire.MAD
	var buf [wire.MADSize]byte
	bad := 0
	for obj := 1; ; obj++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err == io.EOF {
			return bad, nil
		} else if err != nil {
			return bad, fmt.Errorf("object %d: %w", obj, err)
		}
		raw = bytes.TrimSpace(raw)
		err := m.UnmarshalJSON(raw)
		if err == nil {
			err = m.Encode(&buf)
		}
		if err != nil {
			fmt.Fprintf(stderr, "ibcm encode: %s: object %d: %v\n", name, obj, err)
			bad++
			continue
		}
		if err := emit(&buf); err != nil {
			return bad, err
		}
	}
}
