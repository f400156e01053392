package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/limitsdoc"
)

// docs/limits.md states the engine's defaults as the code has them.
func TestLimitsDocEngine(t *testing.T) {
	cfg := NewEngine(Config{}).Config()
	// The lapse of a REQ with rdma_cm's timeouts, measured on an engine.
	lapse := reqLapse(t, 15, 19, 20)
	require.Equal(t, 16*(wire.TimeoutDuration(19)+wire.TimeoutDuration(20)), lapse)
	// The largest Local ACK Timeout whose TimeWait MaxTimeWait leaves whole.
	whole := uint8(0)
	for ack := uint8(1); ack <= 31 && wire.TimeoutDuration(ack) <= cfg.MaxTimeWait; ack++ {
		whole = ack
	}
	perPeer := "no bound of its own"
	if cfg.MaxHalfOpenPerPeer == cfg.MaxHalfOpen {
		perPeer = "`MaxHalfOpen`"
	}
	bad, err := limitsdoc.Check("Engine (`engine.Config`)", "", map[string]string{
		"MaxIDs":             limitsdoc.Thousands(cfg.MaxIDs),
		"MaxHalfOpen":        limitsdoc.Thousands(cfg.MaxHalfOpen),
		"MaxHalfOpenPerPeer": perPeer,
		"MaxOutbound":        limitsdoc.Thousands(cfg.MaxOutbound),
		"MaxNotifications":   limitsdoc.Thousands(cfg.MaxNotifications),
		"MaxRetries":         fmt.Sprint(cfg.MaxRetries),
		"MaxWait":            fmt.Sprint(int64(cfg.MaxWait)),
		// Rules, not numbers: TestFaultCampaign and TestAllocatorCyclic
		// check the behaviour the row states.
		"TimeWait length": "4.096 µs × 2^(Local ACK Timeout), at most `MaxTimeWait`, at least `MinTimeWait`",
		"MaxTimeWait": fmt.Sprintf("%g minute (`DefaultMaxTimeWait`), above the TimeWait of every Local ACK Timeout up to %d (%.0f s)",
			cfg.MaxTimeWait.Minutes(), whole, wire.TimeoutDuration(whole).Seconds()),
		// TestUnansweredREQLapses and TestUnansweredREQLapsesAfterOurMRA
		// check the rule for other timeouts, and after an MRA.
		"REQ lapse": "the REQ's own timeouts: (Max CM Retries + 1) × (4.096 µs × 2^(Local ACK Timeout) + 4.096 µs × 2^(Remote CM Response Timeout)) from its arrival, " +
			fmt.Sprintf("as long as its sender waits for our REP: %.0f s for rdma_cm's REQ (Max CM Retries 15, Local ACK Timeout 19, Remote CM Response Timeout 20)", lapse.Seconds()),
		"Comm-ID space":       "2^32 − 1 IDs, cyclic",
		"Received MAD length": fmt.Sprintf("%d bytes", wire.MADSize),
		"Free lists": fmt.Sprintf("%s ids, %s message buffers, %d comm-ID chunks, %d remote-ID chunks",
			limitsdoc.Thousands(maxFreeConns), limitsdoc.Thousands(maxFreeBufs), maxSpareChunks, maxSpareChunks),
	})
	require.NoError(t, err)
	require.Empty(t, bad)
}

// reqLapse is how long a listening engine holds the id of a REQ with
// these timeouts that nobody answers: from the REQ's arrival to the lapse
// that frees its half-open slot.
func reqLapse(t *testing.T, retries, ackTimeout, respTimeout uint8) time.Duration {
	t.Helper()
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	_, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	p := testREQ(0x1000, 5)
	p.To = b.addr
	p.REQ.MaxCMRetries, p.REQ.PrimaryLocalAckTimeout, p.REQ.RemoteCMResponseTimeout = retries, ackTimeout, respTimeout
	_, err = a.e.Connect(0, p)
	require.NoError(t, err)
	arrival := Time(time.Second)
	require.Equal(t, 1, deliver(t, a, b, arrival))
	b.e.Ready()
	b.e.Advance()
	require.Equal(t, 1, b.e.HalfOpen())
	d, ok := b.e.Deadline()
	require.True(t, ok, "a half-open id has a timer")
	b.e.Tick(d)
	require.Zero(t, b.e.HalfOpen(), "the id lapsed at its deadline")
	return d.Sub(arrival)
}
