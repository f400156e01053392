package cm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// A server answers SIDR for a range of service IDs from one listener: the
// UD QP and Q_Key of the services it runs, and status UNSUPPORTED for the
// others, which ResolveSIDR returns as a *SIDRError.
func ExampleListener_AcceptSIDR() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Service IDs 0x2000 to 0x20ff; only 0x2001 runs here.
	services := map[uint64]uint32{0x2001: 0x33}
	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x2000, Mask: ^uint64(0xff)})
	go func() {
		for {
			r, err := l.AcceptSIDR(ctx)
			if err != nil {
				return
			}
			sid := r.Request().ServiceID
			fmt.Printf("server: SIDR_REQ for %#x: %s\n", sid, bytes.TrimRight(r.Request().PrivateData[:], "\x00"))
			qpn, ok := services[sid]
			if !ok {
				_ = r.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRUnsupported})
				continue
			}
			_ = r.Reply(ctx, &cm.SIDRReplyParams{QPN: qpn, QKey: 0x01234567})
		}
	}()

	for _, sid := range []uint64{0x2001, 0x2002} {
		rep, err := client.ResolveSIDR(ctx, &cm.SIDRParams{To: server.LocalAddr(), ServiceID: sid,
			PrivateData: []byte("hello")})
		var se *cm.SIDRError
		switch {
		case errors.As(err, &se):
			fmt.Printf("client: %#x: %v\n", sid, se.Status)
		case err != nil:
			fmt.Printf("client: %#x: %v\n", sid, err)
		default:
			fmt.Printf("client: %#x: QPN %#x, Q_Key %#x\n", sid, rep.QPN, rep.QKey)
		}
	}
	// Output:
	// server: SIDR_REQ for 0x2001: hello
	// client: 0x2001: QPN 0x33, Q_Key 0x1234567
	// server: SIDR_REQ for 0x2002: hello
	// client: 0x2002: UNSUPPORTED
}
