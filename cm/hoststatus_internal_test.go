package cm

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/ibcm/ibcm/internal/hostproto"
)

// The status of a plain sentinel, which the daemon computes for every
// event of an ended connection, costs no allocation, and is the one its
// probes give.
func TestHostStatusOfASentinelAllocatesNothing(t *testing.T) {
	for _, h := range hostSentinels {
		assert.Equal(t, h.s, hostStatus(h.err).Code, "%v", h.err)
	}
	n := testing.AllocsPerRun(100, func() { _ = hostStatus(ErrDisconnected) })
	assert.Zero(t, n)
	assert.Equal(t, hostproto.StatusDisconnected, hostStatus(ErrDisconnected).Code)
}
