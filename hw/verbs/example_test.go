package verbs_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

// An RC QP taken through INIT, RTR and RTS with the attributes a CM
// computed for each state, then a receive and its completion.
func Example() {
	dev, err := verbs.Open("rxe0")
	if err != nil {
		log.Fatal(err) // ErrNoDevice, or ErrUnavailable in a build without libibverbs
	}
	defer dev.Close() // closes whatever is still open, dependents first

	pd, err := dev.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	mr, err := pd.AllocMR(4096, qpattr.LocalWrite|qpattr.RemoteWrite|qpattr.RemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	ch, err := dev.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	cq, err := dev.NewCQ(64, ch)
	if err != nil {
		log.Fatal(err)
	}
	qp, err := pd.NewQP(verbs.QPConfig{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	if err != nil {
		log.Fatal(err)
	}
	// The QPN goes into the REQ or REP; the CM's answer gives the
	// attributes of each state (cm/qpattr), applied as they are.
	fmt.Printf("QPN 0x%06x\n", qp.QPN())
	var initAttr, rtrAttr, rtsAttr qpattr.Attr // from the CM
	for _, a := range []qpattr.Attr{initAttr, rtrAttr, rtsAttr} {
		if err := qp.Modify(a); err != nil {
			log.Fatal(err) // *verbs.Error wrapping the kernel's errno
		}
	}
	if err := qp.PostRecv(verbs.RecvWR{ID: 1, Segments: []verbs.Segment{{MR: mr, Length: mr.Len()}}}); err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	wcs := make([]verbs.WC, 16)
	n, err := cq.Await(ctx, wcs)
	if err != nil {
		log.Fatal(err)
	}
	for _, wc := range wcs[:n] {
		if wc.Status != verbs.WCSuccess {
			log.Fatalf("WR %d: %v", wc.ID, wc.Status)
		}
		fmt.Printf("%v: %q\n", wc.Opcode, mr.Bytes()[:wc.ByteLen])
	}
}

// Async events in a goroutine that ends with its context (or when the
// device closes): COMM_EST stands in for a lost RTU, the errors end the
// connection.
func ExampleDevice_WaitAsyncEvent() {
	dev, err := verbs.Open("")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		for {
			ev, err := dev.WaitAsyncEvent(ctx)
			if err != nil {
				return // ctx ended, or verbs.ErrClosed
			}
			switch ev.Type {
			case verbs.EventCommEst:
				fmt.Println("QP", ev.QPN, "received before the RTU: tell the CM")
			case verbs.EventQPFatal, verbs.EventQPReqErr, verbs.EventQPAccessErr:
				fmt.Println("QP", ev.QPN, "failed:", ev.Type)
			default:
				fmt.Println(ev)
			}
		}
	}()
}
