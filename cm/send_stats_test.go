package cm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
)

// What the send queue does with each MAD a step produced is counted once:
// a push that makes it busy (Paused), a copy of a MAD still queued
// (Coalesced), a MAD beyond the bound (SendQueueFull).
func TestSendQueueOutcomesAreCounted(t *testing.T) {
	m := &Manager{eng: engine.NewEngine(engine.Config{LocalGUID: 1}), sendq: newSendQueue(8)}
	var out []transport.Packet
	for i := range byte(6) {
		out = append(out, *mad(i)) // the sixth makes it busy
	}
	out = append(out, *mad(0)) // a copy
	for i := range byte(3) {
		out = append(out, *mad(10 + i)) // the last is one too many
	}
	m.outbox = out
	m.flush()
	require.Equal(t, Stats{Paused: 1, Coalesced: 1, SendQueueFull: 1}, m.stats)
	require.Empty(t, m.outbox)
}

// A call refused for a full send queue is counted once in
// Stats.SendQueueRefused.
func TestRefusedCallsAreCounted(t *testing.T) {
	r := newRawRig(t)
	r.fill()
	_, err := r.m.Connect(r.ctx, r.connectREQ())
	require.ErrorIs(t, err, ErrSendQueueFull)
	require.Equal(t, uint64(1), r.m.Stats().SendQueueRefused)
}
