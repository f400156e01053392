package rdmapeer

// qp: a real RC QP behind every connection and no data protocol, as
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

// CmtimeQP is the QP of a connection that moves no data, as cmtime's: it
// needs no buffer and no completion channel of its own; its (never used)
// completions go to one CQ of the device, as a server's QPs commonly share
// one.
var CmtimeQP = QPConfig{SharedCQ: true, SendDepth: 1, RecvDepth: 1,
	Access: qpattr.LocalWrite | qpattr.RemoteWrite | qpattr.RemoteRead}

func init() {
	register(&Program{
		name: "qp",
		check: func(o Options) error {
			if o.Count != 0 || o.Size != 0 {
				return errors.New("a QP that moves no data takes no count or size")
			}
			return nil
		},
		layout: func(Options) QPConfig { return CmtimeQP },
		// The passive side waits for the peer's DREQ; the active side
		// disconnects at once.
		server: func(_ context.Context, s *Session) (bool, error) {
			s.st.Verified, s.st.Check = true, "qp"
			return false, nil
		},
		client: func(_ context.Context, s *Session) (bool, error) {
			s.st.Verified, s.st.Check = true, "qp"
			return true, nil
		},
	})
}
