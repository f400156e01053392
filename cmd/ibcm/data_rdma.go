package main

// --data rdma: rdma-core's rdma_server and rdma_client
// (librdmacm/examples/rdma_server.c, rdma_client.c).
//
// Each side posts one 16-byte receive before connecting or accepting. The
// client SENDs 16 bytes, waits for the send's completion and the server's
// reply, and disconnects; the server waits for the client's message, SENDs
// 16 bytes back, waits for the completion and disconnects (the two DREQs
// may cross). The programs do not look at the bytes, so neither side can
// check more than their length.

import (
	"context"
	"fmt"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

const (
	rdmaMsg  = 16
	rdmaRecv = 0
	rdmaSend = 64
)

func init() {
	dataModes["rdma"] = &dataMode{
		check: func(d *dataOpts, o *netOpts) error {
			if d.count != 0 || d.size != 0 {
				return fmt.Errorf("--data rdma exchanges one %d-byte message each way: no --data-count or --data-size", rdmaMsg)
			}
			return nil
		},
		layout: func(d *dataOpts) dataQPConfig {
			return dataQPConfig{memSize: 128, sendDepth: 1, recvDepth: 1, access: qpattr.LocalWrite}
		},
		prepare: func(s *dataSess) error { return s.qp.postRecv(0, rdmaRecv, rdmaMsg) },
		server: func(ctx context.Context, s *dataSess) (bool, error) {
			if err := s.rdmaRecv(ctx); err != nil {
				return false, err
			}
			return true, s.rdmaSend(ctx, "ibcm rdma_server")
		},
		client: func(ctx context.Context, s *dataSess) (bool, error) {
			if err := s.rdmaSend(ctx, "ibcm rdma_client"); err != nil {
				return false, err
			}
			return true, s.rdmaRecv(ctx)
		},
	}
}

func (s *dataSess) rdmaRecv(ctx context.Context) error {
	wc, err := s.await(ctx, verbs.WCRecv)
	if err != nil {
		return fmt.Errorf("waiting for the peer's message: %w", err)
	}
	s.st.recv++
	s.st.bytes += int(wc.ByteLen)
	s.st.check = "size"
	s.st.verified = wc.ByteLen == rdmaMsg && s.st.problem == ""
	if wc.ByteLen != rdmaMsg {
		s.st.problem = fmt.Sprintf("received %d bytes, want %d", wc.ByteLen, rdmaMsg)
	}
	return nil
}

// rdmaSend SENDs 16 bytes inline (as the programs do where the device
// allows) and waits for its completion.
func (s *dataSess) rdmaSend(ctx context.Context, text string) error {
	copy(s.qp.mem()[rdmaSend:rdmaSend+rdmaMsg], text)
	if err := s.qp.postSend(dataWR{id: 1, op: verbs.OpSend, off: rdmaSend, n: rdmaMsg, inline: true}); err != nil {
		return err
	}
	if _, err := s.await(ctx, verbs.WCSend); err != nil {
		return fmt.Errorf("sending: %w", err)
	}
	s.st.sent++
	s.st.bytes += rdmaMsg
	return nil
}
