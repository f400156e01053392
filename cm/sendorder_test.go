package cm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// sentMAD is one MAD a transport was given: its attribute and the local
// comm ID it carries.
type sentMAD struct {
	attr  wire.AttrID
	local uint32
}

// orderTransport records the MADs it is given, in the order of the Sends.
type orderTransport struct {
	transport.Transport
	mu   sync.Mutex
	sent []sentMAD
}

func (o *orderTransport) Send(ctx context.Context, p *transport.Packet) error {
	local, _ := wire.PeekLocalCommID(&p.MAD)
	o.mu.Lock()
	o.sent = append(o.sent, sentMAD{wire.PeekAttrID(&p.MAD), local})
	o.mu.Unlock()
	return o.Transport.Send(ctx, p)
}

// of is the attributes of the MADs sent about the connection of local comm
// ID id, in order.
func (o *orderTransport) of(id uint32) []wire.AttrID {
	o.mu.Lock()
	defer o.mu.Unlock()
	var as []wire.AttrID
	for _, s := range o.sent {
		if s.local == id {
			as = append(as, s.attr)
		}
	}
	return as
}

// A Connect that gives up while its REQ still waits in the send queue
// (the sender busy with an earlier MAD) has the REJ that ends the attempt
// sent after the REQ, never before it: a REJ ahead of its REQ is about a
// connection the peer does not know yet, and the REQ behind it leaves the
// peer a request that nothing ends (no timer runs on a request waiting
// for its application).
func TestREJOfAnAttemptLeavesAfterItsREQ(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	t.Cleanup(fab.Close)
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	ot := &orderTransport{Transport: ea}
	ga := newGated(ot, false)
	var mu sync.Mutex
	var ids []uint32
	a := boundedManager(t, ga, cm.ManagerConfig{LocalGUID: 0xa, OnEvent: func(e cm.Event) {
		if e.Kind == cm.EventREQSent {
			mu.Lock()
			ids = append(ids, uint32(e.ID))
			mu.Unlock()
		}
	}})
	b := boundedManager(t, eb, cm.ManagerConfig{LocalGUID: 0xb})
	t.Cleanup(ga.release) // before a's Close
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)

	// a's sender is held writing a REQ to a service b does not offer.
	ga.shut()
	go func() { _, _ = a.Connect(ctx, fastREQ(eb, 0x2000, 0x10)) }()
	ga.waitHeld(t, 2*time.Second)
	// The attempt gives up with its REQ still queued behind it.
	short, cancelShort := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancelShort()
	_, err = a.Connect(short, fastREQ(eb, 0x1000, 0x11))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	ga.release()

	mu.Lock()
	require.Len(t, ids, 2, "REQs sent")
	id := ids[1]
	mu.Unlock()
	require.Eventually(t, func() bool { return len(ot.of(id)) >= 2 }, 5*time.Second, time.Millisecond,
		"the attempt's REQ and REJ were not both sent: %v", ot.of(id))
	require.Equal(t, []wire.AttrID{wire.AttrREQ, wire.AttrREJ}, ot.of(id)[:2],
		"the MADs about the attempt given up, in the order they were sent")
}
