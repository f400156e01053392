package main

// --sim-peer: the other side of a listen, connect or probe, run in the
// same process over the same simulated fabric.

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/internal/outcome"
	"github.com/ibcm/ibcm/internal/session"
)

// peerOpts are the options of the --sim-peer side (a cmd) of o: on o's
// fabric and service, named sim-peer, expecting what o's outcomes mean
// for the other side, then o's --sim-peer-args.
func peerOpts(o *netOpts, cmd string) *netOpts {
	p := newNetOpts(cmd)
	p.Transport, p.SimFabric, p.Name = "sim", o.SimFabric, "sim-peer"
	p.Trace, p.Events, p.JSON = o.Trace, o.Events, o.JSON
	p.Expect = outcome.Mirror(o.Expect)
	if o.IP {
		p.IP, p.TCPPort = true, o.TCPPort
	} else {
		p.SID = o.SID
	}
	return p
}

// errPeerArgs is a usage error of --sim-peer-args.
var errPeerArgs = errors.New("bad --sim-peer-args")

// parsePeerArgs parses o's --sim-peer-args onto the peer's flags fs and
// checks the peer's options p.
func parsePeerArgs(o, p *netOpts, fs *flag.FlagSet, stderr io.Writer) error {
	if _, ok := parseAndCheck(fs, p, strings.Fields(o.peerArgs), stderr); !ok {
		return fmt.Errorf("%w %q", errPeerArgs, o.peerArgs)
	}
	return nil
}

// startListenerPeer runs a listener for connect or probe --sim-peer,
// printing to out: it accepts until stop is called (--count 0): REQs the
// peer's engine rejects itself (stale, REJ 10) never reach its listener.
// It returns the listener's address.
func startListenerPeer(ctx context.Context, o *netOpts, out, stderr io.Writer) (transport.Addr, func(grace time.Duration), error) {
	p := peerOpts(o, "listen")
	p.Count, p.Hold = 0, -1
	var la session.ListenConfig
	if err := parsePeerArgs(o, p, listenFlags(p, &la, io.Discard), stderr); err != nil {
		return transport.Addr{}, nil, err
	}
	ready := make(chan transport.Addr, 1)
	stop := make(chan struct{})
	la.OnListening = func(a transport.Addr) { ready <- a }
	la.Stop = stop
	wait := startSimPeer(ctx, func(pctx context.Context) int {
		defer close(ready)
		return listenMain(pctx, p, &la, out, stderr)
	})
	a, ok := <-ready
	if !ok {
		wait(0)
		return a, nil, errors.New("the --sim-peer listener did not start")
	}
	return a, func(grace time.Duration) {
		close(stop)
		wait(grace)
	}, nil
}

// startConnectorPeer runs `connect` to the listener at a for listen
// --sim-peer, and returns a function that waits for it.
func startConnectorPeer(ctx context.Context, o *netOpts, a transport.Addr, stderr io.Writer) (func(time.Duration), error) {
	p := peerOpts(o, "connect")
	p.To, p.Count = &a, max(o.Count, 1)
	if strings.Contains(p.Expect, "peer-disconnect") {
		p.Hold = -1 // this side disconnects
	}
	var ca session.ConnectConfig
	if err := parsePeerArgs(o, p, connectFlags(p, &ca, io.Discard), stderr); err != nil {
		return nil, err
	}
	out := &prefixWriter{w: stderr, prefix: "sim-peer: "}
	return startSimPeer(ctx, func(pctx context.Context) int {
		return connectMain(pctx, p, &ca, out, stderr)
	}), nil
}

// startSimPeer runs run in the background and returns a function that
// waits for it (at most grace, then cancels it).
func startSimPeer(ctx context.Context, run func(ctx context.Context) int) (wait func(grace time.Duration)) {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(pctx)
	}()
	return func(grace time.Duration) {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-done:
		case <-t.C:
		}
		cancel()
		<-done
	}
}

// prefixWriter prefixes every line written to w (for --sim-peer's output).
type prefixWriter struct {
	mu     sync.Mutex
	w      io.Writer
	prefix string
	buf    []byte
}

func (p *prefixWriter) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.buf = append(p.buf, b...)
	for {
		i := strings.IndexByte(string(p.buf), '\n')
		if i < 0 {
			break
		}
		if _, err := io.WriteString(p.w, p.prefix+string(p.buf[:i+1])); err != nil {
			return len(b), err
		}
		p.buf = p.buf[i+1:]
	}
	return len(b), nil
}
