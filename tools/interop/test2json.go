//go:build interop

package interop

import (
	"bytes"
	"encoding/json"
)

// testEvent is one line of go tool test2json's output.
type testEvent struct {
	Action string
	Test   string
}

func testEvents(js []byte) ([]testEvent, error) {
	var out []testEvent
	dec := json.NewDecoder(bytes.NewReader(js))
	for dec.More() {
		var e testEvent
		if err := dec.Decode(&e); err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return out, nil
}
