package rdmapeer

// ucmatose: rdma-core's ucmatose (librdmacm/examples/cmatose.c), both
// roles, for any number of connections at once (-c N).
//
// Both sides post -C receives of -S bytes before connecting or accepting.
// The server waits until all its connections are up; then it SENDs -C
// messages of -S bytes on each (one buffer, sent -C times); the client
// receives them all, then SENDs -C back from its one buffer, which by then
// holds the server's message; the server receives them and disconnects.
// The client's REQ asks RNR retry 0: a SEND that finds no receive posted
// fails at once, so receives go first.

import (
	"bytes"
	"context"
	"fmt"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/verbs"
)

const (
	ucmatoseCount = 10
	ucmatoseSize  = 100
)

// ucmatose's layout: one receive slot per message, then the send buffer.
func ucmatoseSend(o Options) int { return msgCount(o, ucmatoseCount) * msgSize(o, ucmatoseSize) }

func init() {
	register(&Program{
		name:      "ucmatose",
		allAtOnce: true,
		layout: func(o Options) QPConfig {
			n := msgCount(o, ucmatoseCount)
			return QPConfig{MemSize: ucmatoseSend(o) + msgSize(o, ucmatoseSize), SendDepth: n, RecvDepth: n, Access: qpattr.LocalWrite}
		},
		prepare: func(s *Session) error {
			size := msgSize(s.cfg.Options, ucmatoseSize)
			for i := range msgCount(s.cfg.Options, ucmatoseCount) {
				if err := s.qp.PostRecv(uint64(i), i*size, size); err != nil {
					return err
				}
			}
			return nil
		},
		// As cmatose.c's client asks: retry count 5, RNR retry 0.
		req:    func(r *wire.REQ) { r.RetryCount, r.RNRRetryCount = 5, 0 },
		server: ucmatoseServer,
		client: ucmatoseClient,
	})
}

// ucmatoseServer sends first, then checks the client echoed the message
// -C times; then it disconnects.
func ucmatoseServer(ctx context.Context, s *Session) (bool, error) {
	o := s.cfg.Options
	n, size, send := msgCount(o, ucmatoseCount), msgSize(o, ucmatoseSize), ucmatoseSend(o)
	m := s.qp.Mem()
	msg := m[send : send+size]
	fillPattern(msg, byte(s.cfg.Num))
	for i := range n {
		if err := s.qp.PostSend(WR{ID: uint64(1000 + i), Op: verbs.OpSend, Off: send, N: size}); err != nil {
			return false, err
		}
	}
	s.st.Bytes += n * size
	s.st.Check = "echo"
	for i := range n {
		wc, err := s.await(ctx, verbs.WCRecv)
		if err != nil {
			return false, fmt.Errorf("reply %d of %d: %w", i+1, n, err)
		}
		if err := ucmatoseSlot(wc, n, size); err != nil {
			return false, err
		}
		s.st.Recv++
		s.st.Bytes += int(wc.ByteLen)
		got := m[int(wc.ID)*size : int(wc.ID)*size+int(wc.ByteLen)]
		if !bytes.Equal(got, msg) && s.st.Problem == "" {
			s.st.Problem = fmt.Sprintf("reply %d: %d bytes, not the %d-byte message sent", i+1, wc.ByteLen, size)
		}
	}
	if err := s.drainSendsTo(ctx, n); err != nil {
		return false, err
	}
	s.st.Verified = s.st.Problem == ""
	return true, nil
}

// ucmatoseClient receives -C messages, then sends them back; the server
// disconnects.
func ucmatoseClient(ctx context.Context, s *Session) (bool, error) {
	o := s.cfg.Options
	n, size, send := msgCount(o, ucmatoseCount), msgSize(o, ucmatoseSize), ucmatoseSend(o)
	s.st.Check = "size"
	for i := range n {
		wc, err := s.await(ctx, verbs.WCRecv)
		if err != nil {
			return false, fmt.Errorf("message %d of %d: %w", i+1, n, err)
		}
		if err := ucmatoseSlot(wc, n, size); err != nil {
			return false, err
		}
		s.st.Recv++
		s.st.Bytes += int(wc.ByteLen)
		if int(wc.ByteLen) != size && s.st.Problem == "" {
			s.st.Problem = fmt.Sprintf("message %d: %d bytes, want %d", i+1, wc.ByteLen, size)
		}
		// As cmatose.c: the reply is the buffer the messages landed in.
		copy(s.qp.Mem()[send:], s.qp.Mem()[int(wc.ID)*size:int(wc.ID)*size+size])
	}
	for i := range n {
		if err := s.qp.PostSend(WR{ID: uint64(1000 + i), Op: verbs.OpSend, Off: send, N: size}); err != nil {
			return false, err
		}
	}
	s.st.Bytes += n * size
	if err := s.drainSendsTo(ctx, n); err != nil {
		return false, err
	}
	s.st.Verified = s.st.Problem == ""
	return false, nil
}

// ucmatoseSlot checks a receive's completion names one of the n slots of
// size bytes and fits it, before its bytes are read: a device never says
// otherwise, and a completion that did would end the session, not the
// process.
func ucmatoseSlot(wc verbs.WC, n, size int) error {
	if wc.ID >= uint64(n) || int64(wc.ByteLen) > int64(size) {
		return peerErrorf("a receive completion for slot %d of %d with %d bytes, more than its %d", wc.ID, n, wc.ByteLen, size)
	}
	return nil
}
