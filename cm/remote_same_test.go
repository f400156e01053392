package cm_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/transport"
)

// managerBuild makes a Manager on tr with cfg: embedded, or dialed to a
// daemon of its own.
type managerBuild func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager

// bothBackends runs f on embedded Managers, then on dialed ones, each as
// a subtest of its own.
func bothBackends(t *testing.T, f func(t *testing.T, build managerBuild)) {
	t.Run("embedded", func(t *testing.T) {
		f(t, func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager {
			m, err := cm.NewManager(tr, cfg)
			require.NoError(t, err)
			return m
		})
	})
	t.Run("dialed", func(t *testing.T) {
		f(t, func(tr transport.Transport, cfg cm.ManagerConfig) *cm.Manager {
			m, ok, err := throughDaemon(tr, cfg)
			require.True(t, ok)
			require.NoError(t, err)
			return m
		})
	})
}

// sameOnBothBackends runs outcomes on both backends, and requires the
// outcomes each lists to be the same.
func sameOnBothBackends(t *testing.T, outcomes func(*testing.T, managerBuild) []string) {
	var got [][]string // embedded, then dialed
	bothBackends(t, func(t *testing.T, build managerBuild) {
		got = append(got, outcomes(t, build))
	})
	require.Len(t, got, 2)
	assert.Equal(t, got[0], got[1])
	t.Logf("%q", got[1])
}

// connectAccepted connects client to the service 0x1000 that l listens
// for on server, and accepts the request there: the client's Conn, and
// the server's.
func connectAccepted(ctx context.Context, t *testing.T, client, server *cm.Manager, l *cm.Listener) (c, sc *cm.Conn) {
	t.Helper()
	accepted := make(chan *cm.Conn, 1)
	go func() {
		defer close(accepted)
		r, err := l.Accept(ctx)
		if !assert.NoError(t, err) {
			return
		}
		c, err := r.Accept(ctx, &cm.AcceptParams{QP: newFakeQP(0x22)})
		if assert.NoError(t, err) {
			accepted <- c
		}
	}()
	c, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(),
		REQ: client.NewREQ(server.LocalAddr(), 0x1000), QP: newFakeQP(0x11)})
	require.NoError(t, err)
	sc = <-accepted
	require.NotNil(t, sc)
	return c, sc
}

// toldLog is what OnEvent has been told, by connection, once each
// callback has returned.
type toldLog struct {
	mu    sync.Mutex
	kinds map[*cm.Conn][]cm.EventKind
}

// onEvent records each event as its callback returns; those of a
// connection's end take a while, so that a channel closed ahead of them
// finds them untold.
func (l *toldLog) onEvent(ev cm.Event) {
	if ev.Conn == nil {
		return
	}
	switch ev.Kind {
	case cm.EventDREQReceived, cm.EventDisconnected, cm.EventTimeWait, cm.EventTimeWaitExit:
		time.Sleep(20 * time.Millisecond)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.kinds[ev.Conn] = append(l.kinds[ev.Conn], ev.Kind)
}

func (l *toldLog) told(c *cm.Conn, k cm.EventKind) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(l.kinds[c], k)
}

// A Conn's Done closes once OnEvent has been told the TimeWait its step
// began, and TimeWaitExit once it has been told TIMEWAIT_EXIT: whoever a
// channel wakes has heard of the step that closed it, on either side of a
// disconnect, from either backend.
func TestChannelsCloseAfterTheirEvents(t *testing.T) {
	if viaDaemon {
		return // both run in the first run
	}
	bothBackends(t, func(t *testing.T, build managerBuild) {
		fab := simnet.NewFabric(simnet.Config{Seed: 7})
		defer fab.Close()
		log := &toldLog{kinds: map[*cm.Conn][]cm.EventKind{}}
		server := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xb, MaxTimeWait: 20 * time.Millisecond,
			OnEvent: log.onEvent})
		client := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa, MaxTimeWait: 20 * time.Millisecond,
			OnEvent: log.onEvent})
		defer func() {
			require.NoError(t, client.Close())
			require.NoError(t, server.Close())
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
		require.NoError(t, err)
		c, sc := connectAccepted(ctx, t, client, server, l)

		// What each channel's waiter has heard as it wakes.
		type heard struct{ atDone, atExit bool }
		watch := func(c *cm.Conn) chan heard {
			ch := make(chan heard, 1)
			go func() {
				var h heard
				select {
				case <-c.Done():
					h.atDone = log.told(c, cm.EventTimeWait)
				case <-ctx.Done():
				}
				select {
				case <-c.TimeWaitExit():
					h.atExit = log.told(c, cm.EventTimeWaitExit)
				case <-ctx.Done():
				}
				ch <- h
			}()
			return ch
		}
		active, passive := watch(c), watch(sc)
		require.NoError(t, sc.Disconnect(ctx, nil))
		assert.Equal(t, heard{atDone: true, atExit: true}, <-active, "the side the DREQ reached")
		assert.Equal(t, heard{atDone: true, atExit: true}, <-passive, "the side that disconnected")
	})
}

// describe is err as both backends must give it: nil, a refusal by the
// connection's state, the Manager's stop, or the error's text.
func describe(err error) string {
	var se *cm.StateError
	switch {
	case err == nil:
		return "nil"
	case errors.As(err, &se):
		return fmt.Sprintf("%s refused in %s", se.Call, se.State)
	case errors.Is(err, cm.ErrClosed):
		return "closed: " + err.Error()
	}
	return err.Error()
}

// The calls that find their object ended, or end it again, give the same
// outcome on both backends: a Listener closed twice, a Conn disconnected
// or closed after its Done, after its TimeWaitExit and after its
// Manager's Close, a Manager closed twice, and its counters read after it
// stopped, which are those it had.
func TestCallsAfterTheEndAreTheSame(t *testing.T) {
	if viaDaemon {
		return // both run in the first run
	}
	sameOnBothBackends(t, callsAfterTheEnd)
}

func callsAfterTheEnd(t *testing.T, build managerBuild) []string {
	fab := simnet.NewFabric(simnet.Config{Seed: 9})
	defer fab.Close()
	server := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xb, MaxTimeWait: 20 * time.Millisecond})
	client := build(fab.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa, MaxTimeWait: 20 * time.Millisecond})
	var log []string
	say := func(what string, v any) {
		if err, ok := v.(error); ok || v == nil {
			v = describe(err)
		}
		log = append(log, fmt.Sprintf("%s: %v", what, v))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	l2, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x2000})
	require.NoError(t, err)
	say("Listener.Close", l2.Close())
	say("Listener.Close again", l2.Close())

	c, sc := connectAccepted(ctx, t, client, server, l)

	say("Disconnect", sc.Disconnect(ctx, nil))
	say("Disconnect again", sc.Disconnect(ctx, nil))
	<-c.Done()
	say("the peer's Disconnect after its Done", c.Disconnect(ctx, nil))
	say("Conn.Close after Done", c.Close())
	say("Conn.Close again", c.Close())
	<-c.TimeWaitExit()
	<-sc.TimeWaitExit()
	say("Disconnect after TimeWaitExit", c.Disconnect(ctx, nil))
	say("Conn.Close after TimeWaitExit", sc.Close())
	say("State after TimeWaitExit", c.State())
	say("CommEst after TimeWaitExit", sc.CommEst(ctx))
	say("Err after TimeWaitExit", c.Err())

	st := client.Stats()
	say("Manager.Close", client.Close())
	say("Manager.Close again", client.Close())
	say("Stats after Close as before", client.Stats() == st)
	say("Disconnect after Manager.Close", c.Disconnect(ctx, nil))
	say("Conn.Close after Manager.Close", c.Close())
	say("Err after Manager.Close", c.Err())
	say("State after Manager.Close", c.State())
	_, err = client.Listen(ctx, cm.ListenParams{ServiceID: 0x3000})
	say("Listen after Manager.Close", err)

	say("Listener.Close", l.Close())
	st = server.Stats()
	say("Manager.Close", server.Close())
	say("Stats after Close as before", server.Stats() == st)
	say("Listener.Close after Manager.Close", l.Close())
	say("Listener.Close after Manager.Close, once closed already", l2.Close())
	return log
}
