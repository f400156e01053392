// Command rdmaclient connects a real RC queue pair to an rdma_cm server
// (rdma-core's rdma_server, say) by IP address and TCP port over RoCE,
// exchanges one message each way and disconnects: the whole life of a
// connection with ibcm as the CM, hw/verbs for the QP, and package
// rdmapeer for rdma_client's side of the data.
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
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/rdmapeer"
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

	// The device first (hw/verbs): the Manager builds the REQ and the QP's
	// attributes from its port (MTU, P_Key and GID tables, READ depth).
	// Its Close frees whatever is left of the objects made on it.
	dev, err := rdmapeer.OpenVerbs(rdmapeer.VerbsPort{Device: *device, Port: uint8(*port)})
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()

	// The CM runs over the port's user_mad device.
	tr, err := umad.Open(umad.Options{Device: *device, Port: *port})
	if err != nil {
		log.Fatal(err)
	}
	defer tr.Close()
	m, err := cm.NewManager(tr, cm.ManagerConfig{Port: dev.PortInfo()})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	// rdma_client's session: the QP, its completion queue and one buffer,
	// with its 16-byte receive posted before connecting (the server may
	// send as soon as it has our RTU). Connect moves the QP to INIT (again,
	// with the connection's attributes), RTR and RTS before the RTU.
	prog, _ := rdmapeer.Lookup("rdma")
	s, err := prog.Open(dev, rdmapeer.SessionConfig{Role: rdmapeer.Client, Port: m.Port()})
	if err != nil {
		log.Fatal(err)
	}
	conn, err := m.Connect(ctx, &cm.ConnectParams{IP: dst, QP: s.QP()})
	if err != nil {
		log.Fatalf("connect to %v: %v", dst, err)
	}
	fmt.Printf("rdmaclient: connected to %v: QP %#x <-> %#x\n", dst, conn.LocalQPN(), conn.RemoteQPN())

	got, err := s.RDMAExchange(ctx, "hello, rdma_cm!!")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("rdmaclient: sent %d bytes\n", rdmapeer.RDMAMessage)
	fmt.Printf("rdmaclient: received %d bytes: %q\n", len(got), got)

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
	if err := s.Close(); err != nil {
		log.Fatal(err)
	}
	fmt.Println("rdmaclient: disconnected; QP destroyed after TimeWait")
}
