package cm_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/internal/cmswitch"
)

// OnConnEnd (internal/cmswitch) is told of each end once its channel has closed, in order
// with the events: a connection's Done after it is disconnected, its
// TimeWaitExit after the TIMEWAIT_EXIT event; and the end of an attempt
// whose Connect gave up, of which OnEvent hears nothing.
func TestOnConnEndToldOfEveryEnd(t *testing.T) {
	var mu sync.Mutex
	var told []string
	note := func(s string) {
		mu.Lock()
		told = append(told, s)
		mu.Unlock()
	}
	seen := func(s string) bool {
		mu.Lock()
		defer mu.Unlock()
		return slices.Contains(told, s)
	}
	onEnd := func(conn any, freed bool) {
		c := conn.(*cm.Conn)
		ch, what := c.Done(), "done"
		if freed {
			ch, what = c.TimeWaitExit(), "freed"
		}
		select {
		case <-ch:
		default:
			what += " (open)"
		}
		note(fmt.Sprintf("%#x %s", c.LocalQPN(), what))
	}
	onEvent := func(ev cm.Event) {
		if ev.Kind == cm.EventTimeWaitExit {
			note(fmt.Sprintf("%#x %s", ev.Conn.LocalQPN(), ev.Kind))
		}
	}
	p := newSwitchedPair(t, simnet.Config{}, &cmswitch.Switches{OnConnEnd: onEnd},
		cm.ManagerConfig{OnEvent: onEvent}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	connectAndLeave(ctx, t, p)
	require.Eventually(t, func() bool { return seen("0x100 freed") }, 5*time.Second, time.Millisecond)
	mu.Lock()
	assert.Equal(t, []string{"0x100 done", "0x100 TIMEWAIT-EXIT", "0x100 freed"}, told)
	told = nil
	mu.Unlock()

	// A listener that never answers: the Connect gives up.
	_, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
	short, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	_, err = p.a.Connect(short, fastREQ(p.eb, 0x2000, 0x101))
	require.Error(t, err)
	require.Eventually(t, func() bool { return seen("0x101 freed") }, 10*time.Second, time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"0x101 done", "0x101 freed"}, told)
}

// OnConnEnd is told of the ends without OnEvent too: a Manager that takes
// no events closes a connection's channels at once, except for the ends
// OnConnEnd has to hear of.
func TestOnConnEndToldWithoutOnEvent(t *testing.T) {
	ends := make(chan string, 4)
	onEnd := func(conn any, freed bool) { ends <- fmt.Sprintf("%#x freed=%v", conn.(*cm.Conn).LocalQPN(), freed) }
	p := newSwitchedPair(t, simnet.Config{}, &cmswitch.Switches{OnConnEnd: onEnd}, cm.ManagerConfig{}, cm.ManagerConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	connectAndLeave(ctx, t, p)
	for _, want := range []string{"0x100 freed=false", "0x100 freed=true"} {
		select {
		case got := <-ends:
			require.Equal(t, want, got)
		case <-ctx.Done():
			require.FailNow(t, "OnConnEnd not told", want)
		}
	}
}

// connectAndLeave connects p's A to a listener on B with QPN 0x100,
// disconnects, and returns once the connection has left TimeWait.
func connectAndLeave(ctx context.Context, t *testing.T, p *pair) {
	t.Helper()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	serve(ctx, t, l, nil)
	c, err := p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x100))
	require.NoError(t, err)
	require.NoError(t, c.Disconnect(ctx, nil))
	<-c.TimeWaitExit()
}
