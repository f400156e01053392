package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/internal/session"
)

func init() {
	register("listen", "accept CM connections over user_mad or the simulated fabric", runListen)
}

const listenUsage = `usage: ibcm listen [flags]

Listens on a service ID, answers --count REQs with a REP (or a REJ with
--reject), waits for the RTU and holds each connection until the peer
disconnects (or --hold runs out, then sends the DREQ itself). Ends when
--count connections have ended and left TimeWait (--count 0: never), or at
--timeout.

Examples:
  # For rping -c -a 10.0.0.2 -p 7176 (Linux rdma_cm) over Soft-RoCE:
  ibcm listen --device rxe0 --port 1 --ip --tcp-port 7176 --expect peer-disconnect
  # Self-contained, over the in-process simulated fabric:
  ibcm listen --transport sim --sim-peer --sid 0x1000 --count 2

`

func runListen(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	o := newNetOpts("listen")
	var la session.ListenConfig
	fs := listenFlags(o, &la, stderr)
	if code, ok := parseAndCheck(fs, o, args, stderr); !ok {
		return code
	}
	if la.Reject > 0xffff {
		fmt.Fprintln(stderr, "ibcm listen: --reject is a 16-bit reason")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return listenMain(ctx, o, &la, stdout, stderr)
}

// listenFlags registers listen's flags, with o's values as their
// defaults.
func listenFlags(o *netOpts, la *session.ListenConfig, stderr io.Writer) *flag.FlagSet {
	fs := newFlagSet("listen", stderr, listenUsage+netFlagsHelp)
	o.register(fs, portFlags, daemonFlags, serviceFlags, []string{"sidr-port", "sidr-sid", "cm-response-timeout", "retries"}, peerFlags, runFlags)
	registerDataFlags(fs, &o.Data)
	fs.UintVar(&la.Reject, "reject", 0, "answer every REQ with a REJ of this reason (e.g. 28, consumer) instead of a REP")
	fs.Uint64Var(&la.SIDRQPN, "sidr-qpn", 0, "the UD QPN the SIDR_REPs announce (default --qpn; without --data udaddy no QP stands behind it)")
	return fs
}

func listenMain(ctx context.Context, o *netOpts, la *session.ListenConfig, stdout, stderr io.Writer) int {
	ctx, cancel := session.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var waitPeer func(time.Duration)
	if o.simPeer {
		lc, onListening := *la, la.OnListening
		lc.OnListening = func(a transport.Addr) {
			var err error
			if waitPeer, err = startConnectorPeer(ctx, o, a, stderr); err != nil {
				fmt.Fprintln(stderr, "ibcm listen:", err)
			}
			if onListening != nil {
				onListening(a)
			}
		}
		la = &lc
	}
	code := session.Listen(ctx, &o.Options, la, stdout)
	if waitPeer != nil {
		waitPeer(3 * time.Second)
	}
	return code
}
