package rdmapeer

// rdma: rdma-core's rdma_server and rdma_client (librdmacm/examples/
// rdma_server.c, rdma_client.c).
//
// Each side posts one 16-byte receive before connecting or accepting. The
// client SENDs 16 bytes, waits for the send's completion and the server's
// reply, and disconnects; the server waits for the client's message, SENDs
// 16 bytes back, waits for the completion and disconnects (the two DREQs
// may cross). The programs do not look at the bytes, so neither side can
// check more than their length.

import (
	"context"
	"errors"
	"fmt"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

// RDMAMessage is the size of rdma_server's and rdma_client's one message.
const RDMAMessage = 16

const (
	rdmaRecv = 0
	rdmaSend = 64
)

func init() {
	register(&Program{
		name: "rdma",
		check: func(o Options) error {
			if o.Count != 0 || o.Size != 0 {
				return fmt.Errorf("rdma_server and rdma_client exchange one %d-byte message each way: no count or size", RDMAMessage)
			}
			return nil
		},
		layout: func(Options) QPConfig {
			return QPConfig{MemSize: 128, SendDepth: 1, RecvDepth: 1, Access: qpattr.LocalWrite}
		},
		prepare: func(s *Session) error { return s.qp.PostRecv(0, rdmaRecv, RDMAMessage) },
		server: func(ctx context.Context, s *Session) (bool, error) {
			if _, err := s.rdmaRecv(ctx); err != nil {
				return false, err
			}
			if err := s.rdmaSend(ctx, "ibcm rdma_server"); err != nil {
				return false, err
			}
			s.st.Verified = s.st.Problem == ""
			return true, nil
		},
		client: func(ctx context.Context, s *Session) (bool, error) {
			if err := s.rdmaSend(ctx, "ibcm rdma_client"); err != nil {
				return false, err
			}
			if _, err := s.rdmaRecv(ctx); err != nil {
				return false, err
			}
			s.st.Verified = s.st.Problem == ""
			return true, nil
		},
	})
}

// RDMAExchange is rdma_client's data phase on its own: send text (16
// bytes at most) and wait for the server's 16 bytes, which it returns.
// The session is of program rdma, in the client role.
func (s *Session) RDMAExchange(ctx context.Context, text string) ([]byte, error) {
	if s.prog.name != "rdma" || s.cfg.Role != Client {
		return nil, errors.New("RDMAExchange is for an rdma client session")
	}
	if err := s.rdmaSend(ctx, text); err != nil {
		return nil, err
	}
	b, err := s.rdmaRecv(ctx)
	if err == nil && s.st.Problem != "" {
		err = errors.New(s.st.Problem)
	}
	return b, err
}

// rdmaRecv waits for the peer's message and returns it.
func (s *Session) rdmaRecv(ctx context.Context) ([]byte, error) {
	wc, err := s.await(ctx, verbs.WCRecv)
	if err != nil {
		return nil, fmt.Errorf("waiting for the peer's message: %w", err)
	}
	s.st.Recv++
	s.st.Bytes += int(wc.ByteLen)
	s.st.Check = "size"
	if wc.ByteLen != RDMAMessage && s.st.Problem == "" {
		s.st.Problem = fmt.Sprintf("received %d bytes, want %d", wc.ByteLen, RDMAMessage)
	}
	n := min(int(wc.ByteLen), RDMAMessage)
	return append([]byte(nil), s.qp.Mem()[rdmaRecv:rdmaRecv+n]...), nil
}

// rdmaSend SENDs 16 bytes inline (as the programs do where the device
// allows) and waits for its completion.
func (s *Session) rdmaSend(ctx context.Context, text string) error {
	b := s.qp.Mem()[rdmaSend : rdmaSend+RDMAMessage]
	clear(b)
	copy(b, text)
	if err := s.qp.PostSend(WR{ID: 1, Op: verbs.OpSend, Off: rdmaSend, N: RDMAMessage, Inline: true}); err != nil {
		return err
	}
	if _, err := s.await(ctx, verbs.WCSend); err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	s.st.Sent++
	s.st.Bytes += RDMAMessage
	return nil
}
