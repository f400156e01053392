package main

// --data qp: a real RC QP behind every connection and no data protocol, as
// rdma-core's cmtime makes them: the QP is created (and moved to INIT) for
// the connection, the Manager moves it to RTR and RTS before the REP or the
// RTU goes out and to ERR when the connection ends, and it is destroyed
// after TimeWait. It is the QP work a kernel rdma_cm peer does per
// connection, for timing ibcm against it like with like.

import (
	"context"
	"errors"

	"github.com/ibcm/ibcm/cm/qpattr"
)

func init() {
	dataModes["qp"] = &dataMode{
		check: func(d *dataOpts, o *netOpts) error {
			if d.count != 0 || d.size != 0 {
				return errors.New("--data qp moves no data: no --data-count or --data-size")
			}
			return nil
		},
		layout: func(*dataOpts) dataQPConfig {
			// A QP that moves no data needs no buffer and no completion
			// channel of its own: its (never used) completions go to one
			// CQ of the device, as a server's QPs commonly share one.
			return dataQPConfig{sharedCQ: true, sendDepth: 1, recvDepth: 1,
				access: qpattr.LocalWrite | qpattr.RemoteWrite | qpattr.RemoteRead}
		},
		// The passive side waits for the peer's DREQ; the active side
		// disconnects at once (after --hold).
		server: func(_ context.Context, s *dataSess) (bool, error) {
			s.st.verified, s.st.check = true, "qp"
			return false, nil
		},
		client: func(_ context.Context, s *dataSess) (bool, error) {
			s.st.verified, s.st.check = true, "qp"
			return true, nil
		},
	}
}
