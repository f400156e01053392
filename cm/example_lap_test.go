package cm_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// An established connection proposes an alternate path with a LAP, and
// the peer's ManagerConfig.LAPPolicy answers it with an APR. Accepted, the
// path is what QPAttr(qpattr.RTS) loads as the QP's alternate path;
// refused, LoadAltPath returns an *APRError with the peer's status.
func ExampleConn_LoadAltPath() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	// The server takes alternate paths on service level 0 only.
	policy := func(c *cm.Conn, lap *wire.LAP) wire.APRStatus {
		if lap.AlternateSL != 0 {
			return wire.APRInvalidSL
		}
		return wire.APRSuccess
	}
	server, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{LAPPolicy: policy})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	established := make(chan struct{})
	go func() {
		defer close(established)
		req, err := l.Accept(ctx)
		if err == nil {
			_, _ = req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x22}})
		}
	}()
	conn, err := client.Connect(ctx, &cm.ConnectParams{To: server.LocalAddr(),
		REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: 0x11}})
	if err != nil {
		panic(err)
	}
	// The server takes a LAP once it is established: one that overtakes
	// our RTU is dropped, and resent only after the REQ's CM timeouts.
	<-established

	// The alternate path (from a path record, in a real program): from our
	// port's GID, through LID 11, to the server's GID through LID 12, on
	// service level 1, then 0.
	for _, sl := range []uint8{1, 0} {
		lap := &wire.LAP{AlternateLocalPortLID: 11, AlternateRemotePortLID: 12, AlternateSL: sl,
			AlternateLocalPortGID: client.Port().GID, AlternateRemotePortGID: server.LocalAddr().GID,
			AlternateLocalAckTimeout: 18, RemoteCMResponseTimeout: 18}
		err := conn.LoadAltPath(ctx, lap)
		var ae *cm.APRError
		if errors.As(err, &ae) {
			fmt.Printf("SL %d: refused: %v\n", sl, ae.Status)
			continue
		}
		if err != nil {
			panic(err)
		}
		rts, err := conn.QPAttr(ctx, qpattr.RTS)
		if err != nil {
			panic(err)
		}
		fmt.Printf("SL %d: accepted: alternate path to LID %d, SL %d\n", sl, rts.AltAH.DLID, rts.AltAH.SL)
	}
	// Output:
	// SL 1: refused: INVALID_SL
	// SL 0: accepted: alternate path to LID 12, SL 0
}
