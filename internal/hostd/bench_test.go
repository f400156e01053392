package hostd_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cmtime"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"github.com/ibcm/ibcm/internal/hostd"
)

// BenchmarkCmtimeThroughDaemon is cmtime's client (n connections at once,
// then every disconnect at once) over two umadfake ports, side by side: the
// Managers embedded in the process, and the same two ports served by one
// daemon to two cm.Dial clients, the two in turn so that both meet the
// same load. It reports each one's connect and disconnect steps, the
// process's CPU time over each whole run (setup and QP teardown included:
// wall time on a shared machine is mostly other programs'), and the
// daemon's ratios to the embedded.
func BenchmarkCmtimeThroughDaemon(b *testing.B) {
	for _, n := range []int{100, 1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var ec, ed, dc, dd, ecpu, dcpu float64
			for range b.N {
				t0 := cpuMS()
				c, d := cmtimeRun(b, n, false)
				t1 := cpuMS()
				ec, ed, ecpu = ec+c, ed+d, ecpu+t1-t0
				c, d = cmtimeRun(b, n, true)
				dc, dd, dcpu = dc+c, dd+d, dcpu+cpuMS()-t1
			}
			k := float64(b.N)
			b.ReportMetric(ec/k, "embedded-connect-ms")
			b.ReportMetric(ed/k, "embedded-disconnect-ms")
			b.ReportMetric(ecpu/k, "embedded-cpu-ms")
			b.ReportMetric(dc/k, "daemon-connect-ms")
			b.ReportMetric(dd/k, "daemon-disconnect-ms")
			b.ReportMetric(dcpu/k, "daemon-cpu-ms")
			b.ReportMetric(dc/ec, "connect-ratio")
			b.ReportMetric(dd/ed, "disconnect-ratio")
			b.ReportMetric(dcpu/ecpu, "cpu-ratio")
		})
	}
}

// BenchmarkCmtimeOneSide is one side of BenchmarkCmtimeThroughDaemon's
// n=1000 run alone, for a profile (go test -cpuprofile, -trace) of the
// daemon's path or of the embedded one without the other: each run's CPU
// time and its steps' totals. The run before the timed ones warms the
// process up (its heap, its goroutine stacks).
func BenchmarkCmtimeOneSide(b *testing.B) {
	for _, side := range []string{"daemon", "embedded"} {
		b.Run("side="+side, func(b *testing.B) {
			cmtimeRun(b, 1000, side == "daemon")
			b.ResetTimer()
			t0 := cpuMS()
			var c, d float64
			for range b.N {
				c1, d1 := cmtimeRun(b, 1000, side == "daemon")
				c, d = c+c1, d+d1
			}
			k := float64(b.N)
			b.ReportMetric((cpuMS()-t0)/k, "cpu-ms")
			b.ReportMetric(c/k, "connect-ms")
			b.ReportMetric(d/k, "disconnect-ms")
		})
	}
}

// cpuMS is the process's CPU time so far (user and system), in ms.
func cpuMS() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e6
}

// cmtimeRun is one cmtime run of n connections; it returns the connect and
// disconnect steps' totals in ms.
func cmtimeRun(b *testing.B, n int, daemon bool) (connectMS, disconnectMS float64) {
	b.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := umadfake.NewFabric()
	ta, err := f.AddPort(umadfake.PortConfig{LID: 1}).Transport(umad.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ta.Close()
	tb, err := f.AddPort(umadfake.PortConfig{LID: 2}).Transport(umad.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	var ma, mb *cm.Manager
	if daemon {
		s, err := hostd.New(hostd.Config{Group: -1, Ports: []hostd.Port{{Name: "a", Transport: ta}, {Name: "b", Transport: tb}}})
		if err != nil {
			b.Fatal(err)
		}
		path := filepath.Join(b.TempDir(), "s")
		l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
		if err != nil {
			b.Fatal(err)
		}
		go func() { _ = s.Serve(l) }()
		defer s.Close()
		if ma, err = cm.Dial(ctx, path, "a", cm.ManagerConfig{}); err != nil {
			b.Fatal(err)
		}
		if mb, err = cm.Dial(ctx, path, "b", cm.ManagerConfig{}); err != nil {
			b.Fatal(err)
		}
	} else {
		if ma, err = cm.NewManager(ta, cm.ManagerConfig{}); err != nil {
			b.Fatal(err)
		}
		if mb, err = cm.NewManager(tb, cm.ManagerConfig{}); err != nil {
			b.Fatal(err)
		}
	}
	defer ma.Close()
	defer mb.Close()
	const sid = 0x5000
	l, err := mb.Listen(ctx, cm.ListenParams{ServiceID: sid})
	if err != nil {
		b.Fatal(err)
	}
	var qpn atomic.Uint32
	go func() {
		for {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				rep := r.NewREP()
				rep.LocalQPN = 0x10000 + qpn.Add(1)
				_, _ = r.Accept(ctx, &cm.AcceptParams{REP: rep})
			}()
		}
	}()
	to := mb.LocalAddr()
	params := make([]cm.ConnectParams, n)
	for i := range params {
		params[i] = cm.ConnectParams{To: to, REQ: ma.NewREQ(to, sid)}
		params[i].REQ.LocalQPN = uint32(0x100 + i)
	}
	res, err := cmtime.Run(ctx, cmtime.Config{Manager: ma, Params: params, Log: io.Discard})
	if err != nil {
		b.Fatal(err)
	}
	if res.Errors > 0 {
		b.Fatalf("%d of %d connections failed: %v", res.Errors, n, res.Err)
	}
	t := res.Times.Table()
	c, _ := t.Row("connect")
	d, _ := t.Row("disconnect")
	return c.TotalMS, d.TotalMS
}

var _ transport.Transport
