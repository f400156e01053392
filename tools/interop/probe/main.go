// Command probe checks, in the interop harness's VM B, the one thing the
// ibcm CLI cannot drive: hw/umad's kernel-tracked sends. It sends a
// ClassPortInfo Get (class 0x07) to VM A with a kernel response timeout and
// expects either a GetResp (status 0x000C, from a MAD layer with a
// process_mad hook) or, on Soft-RoCE, which drops an unclaimed Get, the
// kernel's send report with status ETIMEDOUT after timeout × (retries + 1).
//
// The CM scenarios themselves (REQ/REP/RTU, REJ, DREQ/DREP, TimeWait, stale
// QPNs) run through `ibcm connect` and `ibcm listen`: see vm-b.sh.
// The cm.Manager answers ClassPortInfo Gets but has no call that sends one,
// and no use for a send report, so this check stays here.
//
// It prints its result as a JSON line of internal/report: a RESULT record
// named get-timeout-report with the verdict (PASS or FAIL) and the detail.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"time"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/internal/report"
)

var (
	flagPeer    = flag.String("peer", "10.0.0.1", "IPv4 address of VM A")
	flagDevice  = flag.String("device", "", "RDMA device (default: the first ACTIVE port)")
	flagTimeout = flag.Duration("get-timeout", 500*time.Millisecond, "kernel response timeout of the Get")
	flagRetries = flag.Int("get-retries", 1, "kernel retries of the Get")
)

const name = "get-timeout-report"

func main() {
	flag.Parse()
	ok, detail := run()
	v := "PASS"
	if !ok {
		v = "FAIL"
	}
	w := report.Writer{W: os.Stdout, Style: report.JSONStyle}
	if err := w.Write(report.New(report.Result, name).With("verdict", v, "text", detail)); err != nil {
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

func run() (bool, string) {
	tr, err := umad.Open(umad.Options{Device: *flagDevice, RequestTimeout: *flagTimeout, RequestRetries: *flagRetries})
	if err != nil {
		return false, "open: " + err.Error()
	}
	defer tr.Close()
	local := tr.LocalAddr()
	peer, err := netip.ParseAddr(*flagPeer)
	if err != nil {
		return false, err.Error()
	}
	var pk transport.Packet
	// RoCE v2: the GID of an IPv4 address is ::ffff:a.b.c.d (As16).
	pk.Addr = transport.Addr{GRH: true, GID: peer.As16(), GIDIndex: local.GIDIndex, HopLimit: 64}
	tid := uint64(rand.Uint32())
	if err := wire.EncodeMAD(&pk.MAD, wire.Header{TID: tid, Method: wire.MethodGet}, &wire.ClassPortInfo{}); err != nil {
		return false, err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	// Send uses Options.RequestTimeout/RequestRetries for a Get.
	if err := tr.Send(ctx, &pk); err != nil {
		return false, "send: " + err.Error()
	}
	for {
		r, err := tr.Recv(ctx)
		if err != nil {
			return false, "neither GetResp nor send report: " + err.Error()
		}
		rtid := wire.PeekTID(&r.MAD)
		if uint32(rtid) != uint32(tid) { // umad owns the high half of the TID
			fmt.Printf("probe: other MAD status %d % x\n", r.Status, r.MAD[:wire.HeaderSize])
			continue
		}
		switch {
		case r.Status == umad.StatusTimeout:
			return wire.PeekMethod(&r.MAD) == wire.MethodGet, fmt.Sprintf("ClassPortInfo Get unanswered by VM A: send report status %d (ETIMEDOUT) after %v, TID %#x (kernel set the high half)",
				r.Status, time.Since(start).Round(time.Millisecond), rtid)
		case r.Status != 0:
			return false, fmt.Sprintf("send report status %d", r.Status)
		case wire.PeekMethod(&r.MAD) == wire.MethodGetResp:
			st := wire.PeekStatus(&r.MAD)
			return st == 0x000c, fmt.Sprintf("GetResp status %#04x from VM A's MAD layer", st)
		}
	}
}
