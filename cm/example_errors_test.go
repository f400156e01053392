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

// Connect's errors say what happened: match the sentinels with errors.Is
// and get a REJ's reason and private data with errors.As. (A *RejectError
// also matches the sentinel its reason implies: ErrStale for 10,
// ErrTimeout for 4, ErrNoResources for 3.)
func Example_errors() {
	fabric := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fabric.Close()
	serverPort := fabric.NewEndpoint()
	server, _ := cm.NewManager(serverPort, cm.ManagerConfig{})
	defer server.Close()
	client, _ := cm.NewManager(fabric.NewEndpoint(), cm.ManagerConfig{})
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// The server turns every request away, saying why in the REJ.
	l, _ := server.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	go func() {
		for {
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			_ = req.Reject(ctx, wire.RejectConsumerDefined, nil, []byte("too busy"))
		}
	}()
	// Nothing answers on this port: no CM runs behind it.
	nobody := fabric.NewEndpoint()

	connect := func(to *simnet.Endpoint, privateData []byte) error {
		req := client.NewREQ(to.LocalAddr(), 0x1000)
		req.LocalQPN = 0x11
		// A try waits 4.096 µs × (2^10 + 2^10), about 8 ms, and is
		// retried twice.
		req.PrimaryLocalAckTimeout, req.RemoteCMResponseTimeout, req.MaxCMRetries = 10, 10, 2
		_, err := client.Connect(ctx, &cm.ConnectParams{To: to.LocalAddr(), REQ: req, PrivateData: privateData})
		return err
	}
	describe := func(err error) {
		var rej *cm.RejectError
		switch {
		case errors.Is(err, cm.ErrBadParam):
			fmt.Println("bad parameter:", err)
		case errors.Is(err, cm.ErrTimeout):
			fmt.Println("no answer:", err)
		case errors.As(err, &rej):
			fmt.Printf("rejected, %v: %s\n", rej.Reason, bytes.TrimRight(rej.PrivateData, "\x00"))
		}
	}
	describe(connect(serverPort, make([]byte, 93)))
	describe(connect(nobody, nil))
	describe(connect(serverPort, nil))
	// Output:
	// bad parameter: cm: invalid parameter: Connect: ConnectParams.PrivateData: wire: REQ.PrivateData: private data too long (93 bytes, at most 92)
	// no answer: cm: timed out
	// rejected, CONSUMER_DEFINED: too busy
}
