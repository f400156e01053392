package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/internal/session"
)

func init() {
	register("connect", "connect to a CM listener over user_mad or the simulated fabric", runConnect)
}

const connectUsage = `usage: ibcm connect [flags]

Sends a REQ (--count times, one connection after another), answers the REP
with an RTU, holds each established connection for --hold and disconnects it
(DREQ, DREP, TimeWait). A DREQ from the peer ends a connection early.

Examples:
  # To rping -s -a 10.0.0.1 -p 7174 (Linux rdma_cm) over Soft-RoCE:
  ibcm connect --device rxe0 --port 1 --ip --dst-ip 10.0.0.1 --tcp-port 7174
  # Reuse one QPN while the first connection is held: the peer rejects the
  # second REQ as stale (REJ 10) and disconnects the first:
  ibcm connect ... --qpn 0xabc003 --qpn-step 0 --count 2 --overlap --hold 10s \
      --expect peer-disconnect,rej:10
  # Self-contained, over the in-process simulated fabric:
  ibcm connect --transport sim --sim-peer --sid 0x1000 --count 3

`

func runConnect(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := newNetOpts("connect")
	var ca session.ConnectConfig
	if code, ok := parseAndCheck(connectFlags(o, &ca, stderr), o, args, stderr); !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return connectMain(ctx, o, &ca, stdout, stderr)
}

// connectFlags registers connect's flags, with o's values as their
// defaults.
func connectFlags(o *netOpts, ca *session.ConnectConfig, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("connect", stderr, connectUsage+netFlagsHelp)
	o.register(fs, portFlags, daemonFlags, serviceFlags, targetFlags, reqFlags, peerFlags, runFlags)
	registerDataFlags(fs, &o.Data)
	fs.BoolVar(&ca.Overlap, "overlap", false, "send the next REQ as soon as a connection is established, holding them all at once")
	fs.DurationVar(&ca.Interval, "interval", 0, "pause before each further REQ")
	fs.DurationVar(&ca.WaitListener, "wait-listener", 0, "retry a REQ rejected with reason 8 (nobody listens yet) every 0.5 s for this long")
	return fs
}

func connectMain(ctx context.Context, o *netOpts, ca *session.ConnectConfig, stdout, stderr io.Writer) int {
	ctx, cancel := session.WithTimeout(ctx, o.Timeout)
	defer cancel()
	if o.simPeer {
		a, stop, err := startListenerPeer(ctx, o, &prefixWriter{w: stderr, prefix: "sim-peer: "}, stderr)
		if err != nil {
			fmt.Fprintln(stderr, "ibcm connect:", err)
			if errors.Is(err, errPeerArgs) {
				return 2
			}
			return 1
		}
		o.To = &a
		defer stop((&cm.ManagerConfig{}).TimeWait(uint8(o.AckTimeout)) + 3*time.Second)
	}
	return session.Connect(ctx, &o.Options, ca, stdout)
}
