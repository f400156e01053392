//go:build !race

// A timing measurement: the race detector's slowdown is no part of it.
// make unit runs it without the detector.

package hostd_test

import (
	"context"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// One client that never reads must not slow the port for the others: the
// Manager only queues its events, and its socket's writer, not the
// Manager, waits on it. A client connects and disconnects 1,000 times
// (through cm.Dial) while a third one, S, gets a steady stream of events
// (a flood of REQs to its listener, each given up 20 ms later); in half
// the rounds S reads them, in the other half it never reads. The
// connecting client's median step must not be more than 10% slower when S
// does not read, in the median round. (Medians, not means: on two shared
// cores a few steps that wait for the CPU make a mean a figure of the
// machine.)
func TestSlowClientDoesNotSlowThePort(t *testing.T) {
	const (
		// Modes alternate often, so that what else the machine runs
		// weighs on both alike.
		rounds  = 20
		perStep = 25 // connections per round and mode: 1,000 in all
		sidS    = 0x2000_0000_0000_0001
		sidB    = 0x2000_0000_0000_0002
	)
	d := startDaemon(t, 3, func(c *hostd.Config) {
		c.Quota.Events = 1 << 22 // S is not to be cut off during the run
		c.Quota.UserEvents = 1 << 23
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	dialM := func(port string) *cm.Manager {
		m, err := cm.Dial(ctx, d.path, port, cm.ManagerConfig{})
		require.NoError(t, err)
		t.Cleanup(func() { m.Close() })
		return m
	}
	a, b, f := dialM("sim0"), dialM("sim2"), dialM("sim1")
	lb, err := b.Listen(ctx, cm.ListenParams{ServiceID: sidB})
	require.NoError(t, err)
	go func() {
		for {
			r, err := lb.Accept(ctx)
			if err != nil {
				return
			}
			go func() { _, _ = r.Accept(ctx, &cm.AcceptParams{}) }()
		}
	}()

	// S: a raw client with a listener, in one of two modes.
	var silent atomic.Bool // S must not read
	sconn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: d.path, Net: "unixpacket"})
	require.NoError(t, err)
	defer sconn.Close()
	for i, fr := range []struct {
		op hostproto.Op
		b  hostproto.Body
	}{{hostproto.OpHello, &hostproto.HelloReq{Port: "sim0"}}, {hostproto.OpListen, &hostproto.ListenReq{ServiceID: sidS, Backlog: 1 << 20}}} {
		f, err := hostproto.AppendFrame(nil, fr.op, 0, uint64(i+1), fr.b)
		require.NoError(t, err)
		_, err = sconn.Write(f)
		require.NoError(t, err)
	}
	var sFrames atomic.Int64
	go func() {
		buf := make([]byte, hostproto.MaxFrame+1)
		for {
			for silent.Load() {
				time.Sleep(time.Millisecond)
			}
			if _, err := sconn.Read(buf); err != nil {
				return
			}
			sFrames.Add(1)
		}
	}()
	require.Eventually(t, func() bool { return d.s.IDs() >= 2 }, 5*time.Second, time.Millisecond)
	// The flood: REQs to S, each given up after 20 ms (a REJ 4 to S's
	// request: more events for S).
	toS := a.LocalAddr()
	var flood sync.WaitGroup
	for i := range 64 {
		flood.Add(1)
		go func() {
			defer flood.Done()
			for ctx.Err() == nil {
				c, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
				req := f.NewREQ(toS, sidS)
				req.LocalQPN = uint32(0x10000 + i)
				_, _ = f.Connect(c, &cm.ConnectParams{To: toS, REQ: req})
				cancel()
			}
		}()
	}
	toB := b.LocalAddr()
	step := func(n int) []time.Duration {
		var ds []time.Duration
		for i := range n {
			start := time.Now()
			req := a.NewREQ(toB, sidB)
			req.LocalQPN = uint32(0x100 + i)
			c, err := a.Connect(ctx, &cm.ConnectParams{To: toB, REQ: req})
			require.NoError(t, err)
			require.NoError(t, c.Disconnect(ctx, nil))
			ds = append(ds, time.Since(start))
		}
		return ds
	}
	step(50) // warm up
	var readsD, silentD []time.Duration
	var ratios []float64
	for i := range rounds {
		var r, q []time.Duration
		// In the order A B B A, so that a drift of the machine's load
		// weighs on both modes alike; 20 ms before each, for S's socket
		// to fill or drain.
		for _, quiet := range [2]bool{i%2 == 1, i%2 == 0} {
			silent.Store(quiet)
			time.Sleep(20 * time.Millisecond)
			if quiet {
				q = step(perStep)
			} else {
				r = step(perStep)
			}
		}
		silent.Store(false)
		readsD, silentD = append(readsD, r...), append(silentD, q...)
		ratios = append(ratios, float64(median(q))/float64(median(r)))
	}
	cancel()
	flood.Wait()
	mean := func(ds []time.Duration) time.Duration {
		var s time.Duration
		for _, d := range ds {
			s += d
		}
		return s / time.Duration(len(ds))
	}
	sort.Float64s(ratios)
	ratio := ratios[len(ratios)/2]
	t.Logf("connect+disconnect step: S reading: mean %v median %v; S silent: mean %v median %v; median of the rounds' ratios %.3f (%.2f to %.2f); S read %d frames",
		mean(readsD), median(readsD), mean(silentD), median(silentD), ratio, ratios[0], ratios[len(ratios)-1], sFrames.Load())
	assert.Less(t, ratio, 1.10, "a client that does not read slowed the others' steps")
}

func median(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}
