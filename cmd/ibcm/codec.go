package main

// `ibcm encode` and `ibcm decode`: cm/wire/madio's streams of MADs, with
// files around them.

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/ibcm/ibcm/cm/wire/madio"
)

func init() {
	register("encode", "encode JSON CM messages into MAD hex lines or a pcap", runEncode)
	register("decode", "decode CM MADs (hex lines or a pcap) into JSON, one object per MAD", runDecode)
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
	fs, pcapPath, code := codecFlags("encode", encodeUsage, "write a pcap file instead of hex lines (- for stdout)", args, stderr)
	if fs == nil {
		return code
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	emit := madio.HexLine(out)
	if pcapPath != "" {
		var w io.Writer = out
		if pcapPath != "-" {
			f, err := os.Create(pcapPath)
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
		var err error
		if emit, err = madio.PcapFrames(w); err != nil {
			fmt.Fprintln(stderr, "ibcm encode:", err)
			return 1
		}
	}
	return eachInput("encode", fs.Args(), stdin, stderr, func(in io.Reader, name string) (int, error) {
		return madio.Encode(in, emit, func(obj int, err error) {
			fmt.Fprintf(stderr, "ibcm encode: %s: object %d: %v\n", name, obj, err)
		})
	})
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
	fs, pcapPath, code := codecFlags("decode", decodeUsage, "read MADs from this pcap file (- for stdin)", args, stderr)
	if fs == nil {
		return code
	}
	out := bufio.NewWriter(stdout)
	defer out.Flush()
	d := &madio.Decoder{W: out, Bad: func(where string, err error) { fmt.Fprintf(stderr, "ibcm decode: %s: %v\n", where, err) }}
	read, inputs := d.HexLines, fs.Args()
	if pcapPath != "" {
		if fs.NArg() > 0 {
			fmt.Fprintln(stderr, "ibcm decode: --pcap takes no other input files")
			return 2
		}
		read, inputs = d.Pcap, []string{pcapPath}
	}
	code = eachInput("decode", inputs, stdin, stderr, func(in io.Reader, name string) (int, error) {
		return 0, read(in, name)
	})
	if code == 0 && d.Failed() > 0 {
		return 1
	}
	return code
}

// codecFlags parses the flags of encode or decode: --pcap, then the
// inputs. On failure fs is nil and code the exit status.
func codecFlags(name, usage, pcapHelp string, args []string, stderr io.Writer) (fs *flag.FlagSet, pcapPath string, code int) {
	fs = newFlagSet(name, stderr, usage)
	fs.StringVar(&pcapPath, "pcap", "", pcapHelp)
	if code, ok := parseFlags(fs, args); !ok {
		return nil, "", code
	}
	return fs, pcapPath, 0
}

// eachInput runs f on every input (stdin for "-" or none), and returns 1
// when f failed on an input (it stops there) or said some of its items
// did, 0 otherwise.
func eachInput(cmd string, inputs []string, stdin io.Reader, stderr io.Writer, f func(in io.Reader, name string) (int, error)) int {
	if len(inputs) == 0 {
		inputs = []string{"-"}
	}
	failed := 0
	for _, name := range inputs {
		var in io.Reader = stdin
		display := "stdin"
		if name != "-" {
			fh, err := os.Open(name)
			if err != nil {
				fmt.Fprintf(stderr, "ibcm %s: %v\n", cmd, err)
				return 1
			}
			defer fh.Close()
			in, display = fh, name
		}
		n, err := f(in, display)
		failed += n
		if err != nil {
			fmt.Fprintf(stderr, "ibcm %s: %s: %v\n", cmd, display, err)
			return 1
		}
	}
	if failed > 0 {
		return 1
	}
	return 0
}
