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

// Two Managers on a simulated fabric: one listens, the other connects and
// disconnects.
func ExampleManager() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xb})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	l, err := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	if err != nil {
		panic(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, err := l.Accept(ctx)
		if err != nil {
			return
		}
		fmt.Printf("server: REQ for service %#x from QPN %#x\n", req.REQ().ServiceID, req.REQ().LocalQPN)
		c, err := req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x22, StartingPSN: 100}})
		if err != nil {
			return
		}
		<-c.Done()
		fmt.Println("server:", c.Err())
	}()

	conn, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(), REQ: wire.REQ{
		ServiceID: 0x1000, LocalQPN: 0x11, StartingPSN: 1, PathPacketPayloadMTU: wire.MTU4096}})
	if err != nil {
		panic(err)
	}
	fmt.Printf("client: established with QPN %#x\n", conn.RemoteQPN())
	if err := conn.Disconnect(ctx, nil); err != nil {
		panic(err)
	}
	<-done
	// Output:
	// server: REQ for service 0x1000 from QPN 0x11
	// client: established with QPN 0x22
	// server: cm: disconnected
}

// A connection attempt nobody listens for is rejected with reason 8.
func ExampleRejectError() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xb})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{LocalGUID: 0xa})
	defer client.Close()

	_, err := client.Connect(context.Background(), &cm.ConnectParams{To: server.LocalAddr(),
		REQ: wire.REQ{ServiceID: 0x2000, LocalQPN: 0x11}})
	var rej *cm.RejectError
	if errors.As(err, &rej) {
		fmt.Println(rej.Reason)
	}
	// Output: INVALID_SERVICE_ID
}
