package cm_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// A QP whose connection was disconnected is no longer connected, even while
// the connection's comm ID waits out TimeWait: a client that reuses the QPN
// at once is accepted. (The server answers with a new QP of its own: its
// old one may not be reused before TimeWaitExit.)
func Example_reuseInTimeWait() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	accepted := make(chan *cm.Conn, 2)
	go func() {
		for qpn := uint32(0x22); ; qpn++ { // a QP of its own for each connection
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			if c, err := req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: qpn}}); err == nil {
				accepted <- c
			}
		}
	}()
	connect := func() (*cm.Conn, error) {
		req := client.NewREQ(server.LocalAddr(), 0x1000)
		req.LocalQPN = 0x11
		req.PrimaryLocalAckTimeout = 17 // TimeWait: 4.096 µs × 2^17, about 0.5 s
		return client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(), REQ: req})
	}

	old, err := connect()
	if err != nil {
		panic(err)
	}
	oldServer := <-accepted
	_ = old.Disconnect(ctx, nil)
	fmt.Println("disconnected:", old.State(), oldServer.State())

	conn, err := connect() // QPN 0x11 again, within TimeWait
	if err != nil {
		panic(err)
	}
	fmt.Printf("QPN %#x connected again, to QPN %#x\n", conn.LocalQPN(), conn.RemoteQPN())
	fmt.Println("old connection:", oldServer.State())
	// Output:
	// disconnected: TIMEWAIT TIMEWAIT
	// QPN 0x11 connected again, to QPN 0x23
	// old connection: TIMEWAIT
}

// A client whose port restarted knows nothing of its old connections, and
// may reuse a QPN the server still has connected. The server rejects that
// REQ with reason 10 (a stale connection, IBTA 12.4.1), which matches
// ErrStale, and tears the old connection down: it sends one DREQ (to a
// client that no longer answers) and waits out TimeWait, and its Err is
// ErrStale. The old connection is no longer connected, so the client's
// retry is accepted at once.
func Example_staleConnection() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xb})
	defer server.Close()
	port := fabric.NewEndpoint()
	client, _ := cm.NewManager(port, cm.ManagerConfig{LocalGUID: 0xa})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	accepted := make(chan *cm.Conn, 2)
	go func() {
		for qpn := uint32(0x22); ; qpn++ { // a QP of its own for each connection
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			if c, err := req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: qpn}}); err == nil {
				accepted <- c
			}
		}
	}()
	connect := func(m *cm.Manager) (*cm.Conn, error) {
		req := m.NewREQ(server.LocalAddr(), 0x1000)
		req.LocalQPN = 0x11
		return m.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(), REQ: req})
	}
	if _, err := connect(client); err != nil {
		panic(err)
	}
	old := <-accepted

	// The client's port goes away without a word, and comes back with
	// the same CA GUID and a new Manager that uses QPN 0x11 again.
	port.SetDown(true)
	restarted, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa})
	defer restarted.Close()
	_, err := connect(restarted)
	fmt.Println(err)
	fmt.Println("stale:", errors.Is(err, cm.ErrStale))
	<-old.Done()
	fmt.Println("old connection:", old.Err(), "in", old.State())

	conn, err := connect(restarted)
	if err != nil {
		panic(err)
	}
	fmt.Printf("retry: QPN %#x connected to QPN %#x\n", conn.LocalQPN(), conn.RemoteQPN())
	// Output:
	// cm: rejected: STALE_CONN (10)
	// stale: true
	// old connection: cm: stale connection in TIMEWAIT
	// retry: QPN 0x11 connected to QPN 0x23
}
