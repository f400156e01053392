// Command wiregen generates the CM wire codec in package
// github.com/ibcm/ibcm/cm/wire from the field table in table.go: the message
// structs, their bit-exact Encode/Decode, the attribute IDs, the MAD union,
// the layout metadata, the JSON field mapping, the MAD common header and the
// functions that read or write one field of a MAD in place.
//
// It runs from cm/wire via `go generate` (//go:generate go run ../../gen/wiregen)
// and writes fields_gen.go, json_gen.go and header_gen.go into the current directory, or into
// -out. The output is deterministic and gofmt-clean.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
)

func main() {
	out := flag.String("out", ".", "directory to write the generated files into")
	flag.Parse()
	files, err := render()
	if err != nil {
		fmt.Fprintln(os.Stderr, "wiregen:", err)
		os.Exit(1)
	}
	for _, name := range outputNames {
		path := filepath.Join(*out, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, files[name]) {
			continue
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "wiregen:", err)
			os.Exit(1)
		}
	}
}

// render builds every generated file, keyed by file name.
func render() (map[string][]byte, error) {
	msgs, err := build(messages)
	if err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	var buf bytes.Buffer
	if err := genFields(msgs).Render(&buf); err != nil {
		return nil, fmt.Errorf("fields_gen.go: %w", err)
	}
	out["fields_gen.go"] = bytes.Clone(buf.Bytes())
	buf.Reset()
	if err := genJSON(msgs).Render(&buf); err != nil {
		return nil, fmt.Errorf("json_gen.go: %w", err)
	}
	out["json_gen.go"] = bytes.Clone(buf.Bytes())
	hdr, err := buildHeader(header)
	if err != nil {
		return nil, err
	}
	pks, err := buildPeeks(msgs, peeks)
	if err != nil {
		return nil, err
	}
	buf.Reset()
	if err := genHeader(hdr, pks).Render(&buf); err != nil {
		return nil, fmt.Errorf("header_gen.go: %w", err)
	}
	out["header_gen.go"] = bytes.Clone(buf.Bytes())
	return out, nil
}

// outputNames lists the generated files in a fixed order.
var outputNames = []string{"fields_gen.go", "json_gen.go", "header_gen.go"}
