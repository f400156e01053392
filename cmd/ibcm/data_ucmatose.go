package main

// --data ucmatose: rdma-core's ucmatose (librdmacm/examples/cmatose.c),
// both roles, for any number of connections at once (-c N: --count N,
// with --overlap on connect).
//
// Both sides post -C receives of -S bytes before connecting or accepting.
// Once established, the server SENDs -C messages of -S bytes (one buffer,
// sent -C times); the client receives them all, then SENDs -C back from
// its one buffer, which by then holds the server's message; the server
// receives them and disconnects. The client's REQ asks RNR retry 0: a
// SEND that finds no receive posted fails at once, so receives go first.

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

func msgCount(d *dataOpts, def int) int {
	if d.count == 0 {
		return def
	}
	return d.count
}

func msgSize(d *dataOpts, def int) int {
	if d.size == 0 {
		return def
	}
	return d.size
}

// ucmatose's layout: one receive slot per message, then the send buffer.
func ucmatoseSend(d *dataOpts) int { return msgCount(d, ucmatoseCount) * msgSize(d, ucmatoseSize) }

func init() {
	dataModes["ucmatose"] = &dataMode{
		layout: func(d *dataOpts) dataQPConfig {
			n := msgCount(d, ucmatoseCount)
			return dataQPConfig{memSize: ucmatoseSend(d) + msgSize(d, ucmatoseSize), sendDepth: n, recvDepth: n, access: qpattr.LocalWrite}
		},
		prepare: func(s *dataSess) error {
			size := msgSize(s.d, ucmatoseSize)
			for i := range msgCount(s.d, ucmatoseCount) {
				if err := s.qp.postRecv(uint64(i), i*size, size); err != nil {
					return err
				}
			}
			return nil
		},
		// As cmatose.c's client asks: retry count 5, RNR retry 0.
		req:    func(r *wire.REQ) { r.RetryCount, r.RNRRetryCount = 5, 0 },
		server: ucmatoseServer,
		client: ucmatoseClient,
	}
}

// ucmatoseServer sends first, then checks the client echoed the message
// -C times; then it disconnects.
func ucmatoseServer(ctx context.Context, s *dataSess) (bool, error) {
	n, size := msgCount(s.d, ucmatoseCount), msgSize(s.d, ucmatoseSize)
	m := s.qp.mem()
	msg := m[ucmatoseSend(s.d) : ucmatoseSend(s.d)+size]
	fillPattern(msg, byte(s.num))
	for i := range n {
		if err := s.qp.postSend(dataWR{id: uint64(1000 + i), op: verbs.OpSend, off: ucmatoseSend(s.d), n: size}); err != nil {
			return false, err
		}
	}
	s.st.bytes += n * size
	s.st.check = "echo"
	s.st.verified = true
	for i := range n {
		wc, err := s.await(ctx, verbs.WCRecv)
		if err != nil {
			return false, fmt.Errorf("reply %d of %d: %w", i+1, n, err)
		}
		s.st.recv++
		s.st.bytes += int(wc.ByteLen)
		got := m[int(wc.ID)*size : int(wc.ID)*size+int(wc.ByteLen)]
		if !bytes.Equal(got, msg) {
			s.st.verified = false
			s.st.problem = fmt.Sprintf("reply %d: %d bytes, not the %d-byte message sent", i+1, wc.ByteLen, size)
		}
	}
	return true, s.drainSendsTo(ctx, n)
}

// ucmatoseClient receives -C messages, then sends them back; the server
// disconnects.
func ucmatoseClient(ctx context.Context, s *dataSess) (bool, error) {
	n, size := msgCount(s.d, ucmatoseCount), msgSize(s.d, ucmatoseSize)
	s.st.check = "size"
	s.st.verified = true
	for i := range n {
		wc, err := s.await(ctx, verbs.WCRecv)
		if err != nil {
			return false, fmt.Errorf("message %d of %d: %w", i+1, n, err)
		}
		s.st.recv++
		s.st.bytes += int(wc.ByteLen)
		if int(wc.ByteLen) != size {
			s.st.verified = false
			s.st.problem = fmt.Sprintf("message %d: %d bytes, want %d", i+1, wc.ByteLen, size)
		}
		// As cmatose.c: the reply is the buffer the messages landed in.
		copy(s.qp.mem()[ucmatoseSend(s.d):], s.qp.mem()[int(wc.ID)*size:int(wc.ID)*size+size])
	}
	for i := range n {
		if err := s.qp.postSend(dataWR{id: uint64(1000 + i), op: verbs.OpSend, off: ucmatoseSend(s.d), n: size}); err != nil {
			return false, err
		}
	}
	s.st.bytes += n * size
	return false, s.drainSendsTo(ctx, n)
}

// drainSendsTo waits until n SENDs have completed in all.
func (s *dataSess) drainSendsTo(ctx context.Context, n int) error {
	for s.st.sent < n {
		if _, err := s.await(ctx, verbs.WCSend); err != nil {
			return err
		}
		s.st.sent++
	}
	return nil
}

// fillPattern fills b with bytes that tell messages and connections apart.
func fillPattern(b []byte, seed byte) {
	for i := range b {
		b[i] = seed + byte(i)
	}
}
