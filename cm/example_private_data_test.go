package cm_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// Private data rides on every CM message: the client's goes in the REQ
// (ConnectParams.PrivateData) and its DREQ (Disconnect), the server's in
// the REP (AcceptParams.PrivateData). Each side reads what its peer sent
// with Conn.PeerPrivateData. The field has a fixed size and the wire
// carries no length, so the bytes after the message are zeros.
func ExampleConn_PeerPrivateData() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	text := func(pd []byte) string { return string(bytes.TrimRight(pd, "\x00")) }

	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, err := l.Accept(ctx)
		if err != nil {
			return
		}
		fmt.Println("server got REQ:", text(req.REQ().PrivateData[:]))
		c, err := req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x22},
			PrivateData: []byte("welcome")})
		if err != nil {
			return
		}
		<-c.Done()
		fmt.Println("server got DREQ:", text(c.PeerPrivateData(wire.AttrDREQ)))
	}()

	conn, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(),
		REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11}, PrivateData: []byte("hello")})
	if err != nil {
		panic(err)
	}
	fmt.Println("client got REP:", text(conn.PeerPrivateData(wire.AttrREP)))
	_ = conn.Disconnect(ctx, []byte("goodbye"))
	<-done
	// Output:
	// server got REQ: hello
	// client got REP: welcome
	// server got DREQ: goodbye
}
