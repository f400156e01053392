package cm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/ibcm/ibcm/cm/transport"
)

// The receiving goroutine takes the MADs already waiting on an Incoming
// transport's channel with the one it received, under the same hold of
// the lock: up to a batch of maxDeliverBatch in all, and, once the send
// queue is busy at one of its flushes (every 16), no more.
func TestReceivedMADsAreTakenInBatches(t *testing.T) {
	waiting := func(n int) chan transport.Packet {
		ch := make(chan transport.Packet, n)
		for range n {
			ch <- transport.Packet{Status: 1} // a send-completion report: nothing for the engine
		}
		return ch
	}
	m := &Manager{eng: engine.NewEngine(engine.Config{LocalGUID: 1}), sendq: newSendQueue(4096)}
	m.recvWaiting(nil)

	ch := waiting(300)
	m.recvWaiting(ch)
	require.Len(t, ch, 300-(maxDeliverBatch-1), "a batch, with the MAD received before")
	ch = waiting(10)
	m.recvWaiting(ch)
	require.Empty(t, ch, "every MAD waiting")

	m.sendq = newSendQueue(4)
	for i := range byte(busyAt(4)) {
		m.sendq.push(mad(i))
	}
	ch = waiting(300)
	m.recvWaiting(ch)
	require.Len(t, ch, 300-15, "none after the first flush that finds the queue busy")
}
