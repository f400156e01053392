package hostproto

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// A string that repeats (an error body's message, event after event) is
// read without a copy; every string read is its own text.
func TestRepeatedStringReadsWithoutACopy(t *testing.T) {
	body := func(s string) []byte {
		e := enc{}
		e.str(s)
		return e.b
	}
	msg := body("cm: disconnected")
	read := func() string {
		d := dec{b: msg}
		return d.str()
	}
	assert.Equal(t, "cm: disconnected", read())
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = read() }))
	for _, s := range []string{"a", "b", "", "cm: closed", "cm: disconnected", "a", "ab", "ba"} {
		d := dec{b: body(s)}
		assert.Equal(t, s, d.str())
		assert.NoError(t, d.end())
	}
}
