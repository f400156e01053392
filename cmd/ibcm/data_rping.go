package main

// --data rping: rdma-core's rping (librdmacm/examples/rping.c), both roles.
//
// Every message is a struct rping_rdma_info (16 bytes: be64 buf, be32 rkey,
// be32 size) naming a buffer of the sender's. One iteration: the client
// SENDs the info of its start buffer, which holds "rdma-ping-N: " and a
// run of letters; the server RDMA READs it into its own buffer and SENDs a
// go-ahead; the client SENDs the info of its RDMA buffer; the server RDMA
// WRITEs the data there (strlen + 1 bytes) and SENDs a go-ahead; the
// client compares the two buffers. A client with -C N disconnects after N
// iterations; the server runs until the peer disconnects. rping checks a
// received message is exactly 16 bytes long.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/internal/report"
)

// rpingInfo is struct rping_rdma_info.
type rpingInfo struct {
	Buf  uint64
	RKey uint32
	Size uint32
}

const rpingInfoSize = 16

// encode writes the info in network byte order.
func (i rpingInfo) encode(b []byte) {
	binary.BigEndian.PutUint64(b[0:8], i.Buf)
	binary.BigEndian.PutUint32(b[8:12], i.RKey)
	binary.BigEndian.PutUint32(b[12:16], i.Size)
}

func decodeRpingInfo(b []byte) (rpingInfo, error) {
	if len(b) != rpingInfoSize {
		return rpingInfo{}, fmt.Errorf("rping message of %d bytes, want %d", len(b), rpingInfoSize)
	}
	return rpingInfo{Buf: binary.BigEndian.Uint64(b[0:8]), RKey: binary.BigEndian.Uint32(b[8:12]), Size: binary.BigEndian.Uint32(b[12:16])}, nil
}

const (
	rpingDefaultSize = 64
	rpingMaxSize     = 64*1024 - 1
	// rpingMinSize is RPING_MIN_BUFSIZE: room for the longest prefix,
	// sizeof("2147483647") + sizeof("rdma-ping-%d: ").
	rpingMinSize     = 11 + 15
	rpingClientCount = 10
)

// rpingPattern is what the client puts in its start buffer for iteration
// ping: "rdma-ping-<ping>: ", then letters from 'A'+ping%58 on, each the
// next one ('A' after 'z'), and a NUL in the last byte.
func rpingPattern(b []byte, ping int) {
	n := copy(b, "rdma-ping-"+strconv.Itoa(ping)+": ")
	c := byte(65 + ping%58)
	for i := n; i < len(b); i++ {
		b[i] = c
		if c++; c > 122 {
			c = 65
		}
	}
	b[len(b)-1] = 0
}

// rping's buffer layout: two receive slots, the send slot, the RDMA
// buffer and (client) the start buffer.
const (
	rpingRecv0 = 0
	rpingSend  = 2 * rpingInfoSize
	rpingRDMA  = 64
)

func rpingSize(d *dataOpts) int {
	if d.size == 0 {
		return rpingDefaultSize
	}
	return d.size
}

func rpingStart(d *dataOpts) int { return rpingRDMA + (rpingSize(d)+63)&^63 }

func init() {
	dataModes["rping"] = &dataMode{
		check: func(d *dataOpts, o *netOpts) error {
			if d.size != 0 && (d.size < rpingMinSize || d.size > rpingMaxSize) {
				return fmt.Errorf("--data-size for rping is %d..%d", rpingMinSize, rpingMaxSize)
			}
			return nil
		},
		layout: func(d *dataOpts) dataQPConfig {
			return dataQPConfig{memSize: rpingStart(d) + rpingSize(d), sendDepth: 16, recvDepth: 2,
				access: qpattr.LocalWrite | qpattr.RemoteRead | qpattr.RemoteWrite}
		},
		prepare: func(s *dataSess) error {
			// rping keeps one receive posted; a second slot covers a
			// go-ahead that arrives before the first one is reposted.
			for i := range 2 {
				if err := s.qp.postRecv(uint64(i), rpingRecv0+i*rpingInfoSize, rpingInfoSize); err != nil {
					return err
				}
			}
			return nil
		},
		server: rpingServer,
		client: rpingClient,
	}
}

// rpingRecv waits for the next message and reposts its slot.
func (s *dataSess) rpingRecv(ctx context.Context) (rpingInfo, error) {
	wc, err := s.await(ctx, verbs.WCRecv)
	if err != nil {
		return rpingInfo{}, err
	}
	s.st.recv++
	s.st.bytes += int(wc.ByteLen)
	off := rpingRecv0 + int(wc.ID)*rpingInfoSize
	info, err := decodeRpingInfo(s.qp.mem()[off : off+int(min(wc.ByteLen, 64))])
	if err != nil {
		return info, err
	}
	return info, s.qp.postRecv(wc.ID, off, rpingInfoSize)
}

// rpingSendInfo SENDs the info in the send slot.
func (s *dataSess) rpingSendInfo(info rpingInfo) error {
	info.encode(s.qp.mem()[rpingSend : rpingSend+rpingInfoSize])
	s.st.bytes += rpingInfoSize
	return s.qp.postSend(dataWR{id: 100, op: verbs.OpSend, off: rpingSend, n: rpingInfoSize})
}

// rpingServer is rping -s: READ the client's start buffer, WRITE it back
// to its RDMA buffer, until the client disconnects. It checks each ping's
// data is the iteration's pattern.
func rpingServer(ctx context.Context, s *dataSess) (bool, error) {
	size := rpingSize(s.d)
	buf := s.qp.mem()[rpingRDMA : rpingRDMA+size]
	want := make([]byte, size)
	s.st.check = "pattern"
	s.st.verified = true
	for ping := 0; ; ping++ {
		src, err := s.rpingRecv(ctx)
		if err != nil {
			return false, s.rpingEnd(err, false)
		}
		if src.Size > uint32(size) {
			return false, fmt.Errorf("ping %d: the client's buffer is %d bytes, ours %d", ping, src.Size, size)
		}
		clear(buf)
		if err := s.qp.postSend(dataWR{id: 200, op: verbs.OpRDMARead, off: rpingRDMA, n: int(src.Size), remoteAddr: src.Buf, rkey: src.RKey}); err != nil {
			return false, err
		}
		if _, err := s.await(ctx, verbs.WCRDMARead); err != nil {
			return false, err
		}
		s.st.reads++
		s.st.bytes += int(src.Size)
		got := buf[:src.Size]
		rpingPattern(want[:src.Size], ping)
		if !bytes.Equal(got, want[:src.Size]) {
			s.st.verified = false
			s.st.problem = fmt.Sprintf("ping %d: read %q, want %q", ping, cstring(got), cstring(want[:src.Size]))
		}
		if s.d.verbose {
			s.print(report.New(report.DataPing, "").With("conn", s.num, "text", "server ping data: "+string(cstring(got))))
		}
		if err := s.rpingSendInfo(rpingInfo{}); err != nil { // go ahead
			return false, err
		}
		sink, err := s.rpingRecv(ctx)
		if err != nil {
			return false, s.rpingEnd(err, true)
		}
		n := len(cstring(got)) + 1
		if n > int(sink.Size) {
			return false, fmt.Errorf("ping %d: the client's sink is %d bytes, the data %d", ping, sink.Size, n)
		}
		if err := s.qp.postSend(dataWR{id: 201, op: verbs.OpRDMAWrite, off: rpingRDMA, n: n, remoteAddr: sink.Buf, rkey: sink.RKey}); err != nil {
			return false, err
		}
		if _, err := s.await(ctx, verbs.WCRDMAWrite); err != nil {
			return false, err
		}
		s.st.writes++
		s.st.bytes += n
		if err := s.rpingSendInfo(rpingInfo{}); err != nil { // go ahead
			return false, err
		}
		s.st.iterations++
	}
}

// rpingEnd ends the server's loop: a flush while waiting for the next
// ping is the client's disconnect, which ends a complete run.
func (s *dataSess) rpingEnd(err error, within bool) error {
	if !errors.Is(err, errFlushed) {
		return err
	}
	s.st.peerDisconnect = true
	switch {
	case within:
		s.st.problem = fmt.Sprintf("the client disconnected within ping %d", s.st.iterations)
	case s.d.count > 0 && s.st.iterations != s.d.count:
		s.st.problem = fmt.Sprintf("%d pings, want %d", s.st.iterations, s.d.count)
	case s.st.iterations == 0:
		s.st.problem = "no ping"
	}
	return nil
}

// rpingClient is rping -c -V -C N: N pings, each checked, then disconnect.
func rpingClient(ctx context.Context, s *dataSess) (bool, error) {
	size := rpingSize(s.d)
	count := s.d.count
	if count == 0 {
		count = rpingClientCount
	}
	m := s.qp.mem()
	start := m[rpingStart(s.d) : rpingStart(s.d)+size]
	sink := m[rpingRDMA : rpingRDMA+size]
	s.st.check = "pattern"
	s.st.verified = true
	for ping := range count {
		rpingPattern(start, ping)
		if err := s.rpingSendInfo(rpingInfo{Buf: s.qp.addr() + uint64(rpingStart(s.d)), RKey: s.qp.rkey(), Size: uint32(size)}); err != nil {
			return false, err
		}
		if _, err := s.rpingRecv(ctx); err != nil { // the server read it
			return false, fmt.Errorf("ping %d, waiting for the read: %w", ping, err)
		}
		if err := s.rpingSendInfo(rpingInfo{Buf: s.qp.addr() + rpingRDMA, RKey: s.qp.rkey(), Size: uint32(size)}); err != nil {
			return false, err
		}
		if _, err := s.rpingRecv(ctx); err != nil { // the server wrote it back
			return false, fmt.Errorf("ping %d, waiting for the write: %w", ping, err)
		}
		s.st.bytes += 2 * size // the server's READ and WRITE
		if !bytes.Equal(start, sink) {
			s.st.verified = false
			s.st.problem = fmt.Sprintf("ping %d: data mismatch: %q came back for %q", ping, cstring(sink), cstring(start))
		}
		if s.d.verbose {
			s.print(report.New(report.DataPing, "").With("conn", s.num, "text", "ping data: "+string(cstring(sink))))
		}
		s.st.iterations++
	}
	return true, s.drainPendingSends(ctx)
}

// drainPendingSends waits until every SEND posted so far completed, so
// that the disconnect does not flush one the peer has not acknowledged.
func (s *dataSess) drainPendingSends(ctx context.Context) error {
	if s.d.mode != "rping" {
		return nil
	}
	// rping posts one SEND per message: two per iteration.
	for s.st.sent < 2*s.st.iterations {
		if _, err := s.await(ctx, verbs.WCSend); err != nil {
			return err
		}
		s.st.sent++
	}
	return nil
}

// cstring is b up to its first NUL.
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}
