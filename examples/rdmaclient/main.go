// Command rdmaclient connects a real RC queue pair to an rdma_cm server
// (rdma-core's rdma_server, say) by IP address and TCP port over RoCE,
// exchanges one message each way and disconnects: the whole life of a
// connection with ibcm as the CM and hw/verbs for the QP.
//
//	rdmaclient -device rxe0 -server 10.0.0.1:7471
//
// ibcm speaks the CM protocol itself, over the port's user_mad device, and
// the CM class goes to one agent per port: the kernel CM (ib_cm) must not
// be loaded on this host, and no other ibcm process may run on the port.
// Build with cgo (hw/verbs links libibverbs).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/verbs"
)

func main() {
	device := flag.String("device", "rxe0", "RDMA device")
	port := flag.Int("port", 1, "its port")
	server := flag.String("server", "10.0.0.1:7471", "the rdma_cm server's IP address and TCP port")
	flag.Parse()
	dst, err := netip.ParseAddrPort(*server)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The device first: the Manager builds the REQ and the QP's
	// attributes from its port (MTU, P_Key and GID tables, READ depth).
	// dev.Close frees whatever is left of the objects made on it, in order.
	dev, err := verbs.Open(*device)
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	snap, err := dev.PortSnapshot(uint8(*port))
	if err != nil {
		log.Fatal(err)
	}

	// The CM runs over the port's user_mad device.
	tr, err := umad.Open(umad.Options{Device: *device, Port: *port})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	m, err := cm.NewManager(tr, cm.ManagerConfig{Port: snap.PortInfo()})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	// The QP, its completion queue and one buffer: 16 bytes to receive,
	// 16 to send.
	pd, err := dev.AllocPD()
	must(err)
	ch, err := dev.NewCompChannel()
	must(err)
	cq, err := dev.NewCQ(4, ch)
	must(err)
	qp, err := pd.NewQP(verbs.QPConfig{Type: verbs.RC, SendCQ: cq, RecvCQ: cq})
	must(err)
	mr, err := pd.AllocMR(32, qpattr.LocalWrite)
	must(err)
	recv := verbs.Segment{MR: mr, Offset: 0, Length: 16}
	send := verbs.Segment{MR: mr, Offset: 16, Length: 16}

	// Post the receive before connecting: the server may send as soon as
	// it has our RTU. A QP takes receives from INIT on; Connect then moves
	// it to INIT (again, with the connection's attributes), RTR and RTS
	// before the RTU goes out.
	must(qp.Modify(qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | qpattr.MaskPKeyIndex | qpattr.MaskPort | qpattr.MaskAccessFlags,
		PortNum: uint8(*port)}))
	must(qp.PostRecv(verbs.RecvWR{ID: 1, Segments: []verbs.Segment{recv}}))
	conn, err := m.Connect(ctx, &cm.ConnectParams{IP: dst, QP: qp})
	if err != nil {
		log.Fatalf("connect to %v: %v", dst, err)
	}
	fmt.Printf("rdmaclient: connected to %v: QP %#x <-> %#x\n", dst, conn.LocalQPN(), conn.RemoteQPN())

	copy(mr.Bytes()[16:32], "hello, rdma_cm!!")
	must(qp.PostSend(verbs.SendWR{ID: 2, Op: verbs.OpSend, Segments: []verbs.Segment{send}, Signaled: true}))
	for got := 0; got < 2; {
		wcs := make([]verbs.WC, 2)
		n, err := cq.Await(ctx, wcs)
		must(err)
		for _, wc := range wcs[:n] {
			if wc.Status != verbs.WCSuccess {
				log.Fatalf("work request %d: %v", wc.ID, wc.Status)
			}
			if wc.Opcode == verbs.WCRecv {
				fmt.Printf("rdmaclient: received %d bytes: %q\n", wc.ByteLen, mr.Bytes()[:wc.ByteLen])
			} else {
				fmt.Println("rdmaclient: sent 16 bytes")
			}
			got++
		}
	}

	// DREQ, DREP; the Manager moves the QP to ERR. rdma_server disconnects
	// as soon as its send completed: its DREQ may come first, and then the
	// connection is in TimeWait already. The QP may be destroyed once the
	// connection left TimeWait: packets of it may still arrive until then.
	if err := conn.Disconnect(ctx, nil); err != nil {
		if !errors.Is(err, cm.ErrInvalidState) || !errors.Is(conn.Err(), cm.ErrDisconnected) {
			log.Fatalf("disconnect: %v", err)
		}
		fmt.Println("rdmaclient: the server disconnected first")
	}
	select {
	case <-conn.TimeWaitExit():
	case <-ctx.Done():
		log.Fatal("TimeWait did not end")
	}
	must(qp.Close())
	fmt.Println("rdmaclient: disconnected; QP destroyed after TimeWait")
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
