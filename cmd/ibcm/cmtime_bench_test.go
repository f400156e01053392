package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cmtime"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"github.com/ibcm/ibcm/internal/session"
)

// consoleWriter stands in for a serial console: writes are serialized, as
// on a tty, and each returns once the console has taken its bytes at rate
// bytes per second (the writer sleeps off what it owes in slices of at
// least a millisecond, so that timer slack does not slow it further). It
// adds up the time the Manager's own goroutine spent in its writes: the
// CLI's tracer prints from there.
type consoleWriter struct {
	mu     sync.Mutex
	rate   float64
	n      int64
	free   time.Time // when the console has sent everything written
	inLoop time.Duration
	stack  []byte
}

func (c *consoleWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n += int64(len(p))
	now := time.Now()
	if c.free.Before(now) {
		c.free = now
	}
	c.free = c.free.Add(time.Duration(float64(len(p)) / c.rate * float64(time.Second)))
	if c.stack == nil {
		c.stack = make([]byte, 64<<10)
	}
	inLoop := false
	if k := runtime.Stack(c.stack, false); bytes.Contains(c.stack[:k], []byte("cm.(*Manager).loop")) {
		inLoop = true
	}
	if d := time.Until(c.free); d > time.Millisecond {
		time.Sleep(d)
	}
	if inLoop {
		c.inLoop += time.Since(now)
	}
	return len(p), nil
}

// BenchmarkCmtimeUMADFake is the interop bench's passive role in one
// process, over hw/umad on the in-process fake device: `ibcm cmtime -c N`
// against `ibcm listen`, both the real commands, with the
// listener's event lines discarded, or written to a console of
// IBCM_BENCH_CONSOLE_RATE bytes/s (default 670,000: VM B's serial console
// in the interop bench, for 100-byte writes). Each iteration is one
// run; the metrics are cmtime's step totals and its fastest disconnect
// (how long the quickest DREQ waited for its DREP), and the connections
// the listener rejected (REJ 3: its backlog of 128 was full), how long
// the Manager's goroutine itself spent writing event lines, and the
// process's CPU time (user and system, getrusage) per connection and side:
// both commands run in this process, so the run's CPU time is halved, and
// it covers each side's Manager, transport, command and the fake device.
func BenchmarkCmtimeUMADFake(b *testing.B) {
	rate := 670_000.0
	if s := os.Getenv("IBCM_BENCH_CONSOLE_RATE"); s != "" {
		if v, err := strconv.ParseFloat(s, 64); err == nil && v > 0 {
			rate = v
		}
	}
	for _, n := range []int{100, 1000} {
		for _, out := range []string{"discard", "console"} {
			b.Run(fmt.Sprintf("n=%d/out=%s", n, out), func(b *testing.B) {
				var conn, disc, discMin, connMin, failed, inLoop, cpu float64
				for i := 0; i < b.N; i++ {
					var w io.Writer = io.Discard
					cw := &consoleWriter{rate: rate}
					if out == "console" {
						w = cw
					}
					c0 := processCPU()
					r, bad := cmtimeFakeRun(b, n, w)
					cpu += float64(processCPU()-c0) / 1e3 / float64(2*n)
					failed += float64(bad)
					inLoop += float64(cw.inLoop) / 1e6
					conn += r["connect"][0]
					disc += r["disconnect"][0]
					connMin += r["connect"][2]
					discMin += r["disconnect"][2]
				}
				k := float64(b.N)
				b.ReportMetric(conn/k, "connect-ms")
				b.ReportMetric(disc/k, "disconnect-ms")
				b.ReportMetric(connMin/k/1000, "connect-min-ms")
				b.ReportMetric(discMin/k/1000, "disconnect-min-ms")
				b.ReportMetric(failed/k, "rejected")
				b.ReportMetric(inLoop/k, "manager-writing-ms")
				b.ReportMetric(cpu/k, "cpu-us/conn-side")
			})
		}
	}
}

// cmtimeFakeRun runs one listen/cmtime pair of n connections over a fresh
// fake fabric, the listener writing to w, and returns cmtime's rows and how
// many connections failed (the listener rejects REQs beyond its backlog).
func cmtimeFakeRun(b *testing.B, n int, w io.Writer) (map[string][4]float64, int) {
	b.Helper()
	f := umadfake.NewFabric()
	pa := f.AddPort(umadfake.PortConfig{Device: "rxe0", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.1"), NodeGUID: 0xa1})
	pb := f.AddPort(umadfake.PortConfig{Device: "rxe1", RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2"), NodeGUID: 0xb2})
	saved := session.OpenUMAD
	defer func() { session.OpenUMAD = saved }()
	openUMADFakes(pa, pb)

	// ibcm listen, accepting until cmtime is done (--count 0: a rejected
	// REQ never comes back, so a count would never be reached).
	lo := newNetOpts("listen")
	var la session.ListenConfig
	fs := listenFlags(lo, &la, io.Discard)
	if _, ok := parseAndCheck(fs, lo, []string{"--device", "rxe1", "--port", "1", "--ip", "--tcp-port", "7471",
		"--count", "0", "--expect", "peer-disconnect", "--timeout", "120s"}, io.Discard); !ok {
		b.Fatal("listen flags")
	}
	stop := make(chan struct{})
	la.Stop = stop
	ready := make(chan struct{})
	var once sync.Once
	la.OnListening = func(transport.Addr) { once.Do(func() { close(ready) }) }
	done := make(chan int)
	go func() { done <- listenMain(context.Background(), lo, &la, w, io.Discard) }()
	<-ready

	var out strings.Builder
	run([]string{"cmtime", "--device", "rxe0", "--port", "1", "-s", "10.0.0.2", "-c", strconv.Itoa(n),
		"--ack-timeout", "10", "--timeout", "120s"}, strings.NewReader(""), &out, io.Discard)
	close(stop)
	<-done
	rows := map[string][4]float64{}
	failed := len(failRE.FindAllString(out.String(), -1))
	tab, _ := cmtime.Parse(strings.NewReader(out.String()))
	for _, r := range tab {
		rows[r.Step] = r.Figures()
	}
	if _, ok := rows["disconnect"]; !ok {
		b.Fatalf("no table:\n%s", out.String())
	}
	return rows, failed
}

// processCPU is the process's CPU time so far, user and system; 0 if
// getrusage fails.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var failRE = regexp.MustCompile(`(?m)^connect \d+: `)

// openUMADFakes makes --transport umad open the fake ports by device name
// (the caller restores openUMAD).
func openUMADFakes(ports ...*umadfake.Port) {
	session.OpenUMAD = func(device string, port, gidIndex int) (*umad.Transport, error) {
		for _, p := range ports {
			if p.Info().Device == device {
				return p.Transport(umad.Options{})
			}
		}
		return nil, fmt.Errorf("%w: device %q", umad.ErrNoPort, device)
	}
}
