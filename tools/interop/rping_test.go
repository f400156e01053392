package interop

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rpingClientLog is VM A's log of rping -c -v -V -C pings: its stderr
// lines first (unbuffered), then its pings (stdout, written at exit), then
// the end record with exit status rc.
func rpingClientLog(t *testing.T, rc, pings int, stderr ...string) *Log {
	lines := []string{`{"frame":"begin","vm":"A","log":"data-rping-c-r","t":122.40}`}
	lines = append(lines, stderr...)
	for i := range pings {
		lines = append(lines, fmt.Sprintf("ping data: rdma-ping-%d: ABCDEFGHIJKLMNOPQRSTUVWXYZ", i))
	}
	lines = append(lines, fmt.Sprintf(`{"frame":"end","vm":"A","log":"data-rping-c-r","rc":%d,"t":122.42}`, rc))
	c, err := ParseConsole(strings.NewReader(strings.Join(lines, "\r\n") + "\r\n"))
	require.NoError(t, err)
	return c.Log("data-rping-c-r")
}

const (
	disconnectLine = "client DISCONNECT EVENT..."
	ebadfLine      = "rdma_get_cm_event: Bad file descriptor"
)

func TestRpingTeardownRaceIsTheClientThatFinished(t *testing.T) {
	// What make interop's VM A printed: every ping made and verified, the
	// DISCONNECTED handled, then the CM thread read the channel main had
	// closed, and exit(-1).
	assert.True(t, RpingTeardownRace(rpingClientLog(t, 255, 10, disconnectLine, ebadfLine), 10))
}

func TestRpingTeardownRaceRefusesAnyOtherEnd(t *testing.T) {
	for _, c := range []struct {
		name   string
		rc     int
		pings  int
		stderr []string
	}{
		{"exit 0 is no race", 0, 10, []string{disconnectLine}},
		{"another exit status", 1, 10, []string{disconnectLine, ebadfLine}},
		{"a ping missing", 255, 9, []string{disconnectLine, ebadfLine}},
		{"no disconnect before the read", 255, 10, []string{ebadfLine}},
		{"the read before the disconnect", 255, 10, []string{ebadfLine, disconnectLine}},
		{"a ping that did not verify", 255, 10, []string{"data mismatch!", disconnectLine, ebadfLine}},
		{"the client failed", 255, 10, []string{"rping client failed: -1", disconnectLine, ebadfLine}},
		{"a completion in error", 255, 10, []string{"cq completion failed status 12", disconnectLine, ebadfLine}},
		{"two reads", 255, 10, []string{disconnectLine, ebadfLine, ebadfLine}},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.False(t, RpingTeardownRace(rpingClientLog(t, c.rc, c.pings, c.stderr...), 10))
		})
	}
	assert.False(t, RpingTeardownRace(&Log{Name: "never ended"}, 10), "a log without its end")
}
