package cm_test

import (
	"context"
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
		sc := <-accepted
		require.NotNil(t, sc)

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
