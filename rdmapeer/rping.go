package rdmapeer

// rping: rdma-core's rping (librdmacm/examples/rping.c), both roles.
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
		return rpingInfo{}, peerErrorf("rping message of %d bytes, want %d", len(b), rpingInfoSize)
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
	if len(b) > 0 {
		b[len(b)-1] = 0
	}
}

// rping's buffer layout: two receive slots, the send slot, the RDMA
// buffer and (client) the start buffer.
const (
	rpingRecv0 = 0
	rpingSend  = 2 * rpingInfoSize
	rpingRDMA  = 64
)

func rpingSize(o Options) int {
	if o.Size == 0 {
		return rpingDefaultSize
	}
	return o.Size
}

func rpingStart(o Options) int { return rpingRDMA + (rpingSize(o)+63)&^63 }

func init() {
	register(&Program{
		name: "rping",
		check: func(o Options) error {
			if o.Size != 0 && (o.Size < rpingMinSize || o.Size > rpingMaxSize) {
				return fmt.Errorf("the size for rping is %d..%d", rpingMinSize, rpingMaxSize)
			}
			return nil
		},
		layout: func(o Options) QPConfig {
			return QPConfig{MemSize: rpingStart(o) + rpingSize(o), SendDepth: 16, RecvDepth: 2,
				Access: qpattr.LocalWrite | qpattr.RemoteRead | qpattr.RemoteWrite}
		},
		prepare: func(s *Session) error {
			// rping keeps one receive posted; a second slot covers a
			// go-ahead that arrives before the first one is reposted.
			for i := range 2 {
				if err := s.qp.PostRecv(uint64(i), rpingRecv0+i*rpingInfoSize, rpingInfoSize); err != nil {
					return err
				}
			}
			return nil
		},
		server:       rpingServer,
		client:       rpingClient,
		boundsItself: true,
	})
}

// rpingRecv waits for the next message and reposts its slot.
func (s *Session) rpingRecv(ctx context.Context) (rpingInfo, error) {
	wc, err := s.await(ctx, verbs.WCRecv)
	if err != nil {
		return rpingInfo{}, err
	}
	if wc.ID > 1 {
		return rpingInfo{}, peerErrorf("a receive completion for slot %d of 2", wc.ID)
	}
	s.st.Recv++
	s.st.Bytes += int(wc.ByteLen)
	off := rpingRecv0 + int(wc.ID)*rpingInfoSize
	info, err := decodeRpingInfo(s.qp.Mem()[off : off+int(min(wc.ByteLen, 64))])
	if err != nil {
		return info, err
	}
	return info, s.qp.PostRecv(wc.ID, off, rpingInfoSize)
}

// rpingSendInfo SENDs the info in the send slot.
func (s *Session) rpingSendInfo(info rpingInfo) error {
	info.encode(s.qp.Mem()[rpingSend : rpingSend+rpingInfoSize])
	s.st.Bytes += rpingInfoSize
	return s.qp.PostSend(WR{ID: 100, Op: verbs.OpSend, Off: rpingSend, N: rpingInfoSize})
}

// rpingServer is rping -s: READ the client's start buffer, WRITE it back
// to its RDMA buffer, until the client disconnects. It checks each ping's
// data is the iteration's pattern.
func rpingServer(ctx context.Context, s *Session) (bool, error) {
	size := rpingSize(s.cfg.Options)
	buf := s.qp.Mem()[rpingRDMA : rpingRDMA+size]
	want := make([]byte, size)
	s.st.Check = "pattern"
	for ping := 0; ; ping++ {
		if err := s.rpingServe(ctx, ping, buf, want); err != nil {
			if errors.Is(err, errRpingEnd) {
				return false, nil
			}
			return false, err
		}
		s.st.Iterations++
	}
}

// errRpingEnd: the client disconnected between pings, the server's end.
var errRpingEnd = errors.New("rping: the client disconnected")

// rpingServe serves one ping within the data timeout. It returns
// errRpingEnd when the client disconnected (rpingEnd says whether that
// ended the run well).
func (s *Session) rpingServe(ctx context.Context, ping int, buf, want []byte) error {
	ctx, cancel := withTimeout(ctx, s.cfg.timeout())
	defer cancel()
	size := len(buf)
	src, err := s.rpingRecv(ctx)
	if err != nil {
		return s.rpingEnd(err, false)
	}
	// The client's buffer is one rping allows and fits ours: the READ
	// lands in it and the pattern ends in a NUL inside it.
	if src.Size < rpingMinSize || src.Size > uint32(size) {
		return peerErrorf("ping %d: the client's buffer size is %d, want %d..%d", ping, src.Size, rpingMinSize, size)
	}
	clear(buf)
	if err := s.qp.PostSend(WR{ID: 200, Op: verbs.OpRDMARead, Off: rpingRDMA, N: int(src.Size), RemoteAddr: src.Buf, RKey: src.RKey}); err != nil {
		return err
	}
	if _, err := s.await(ctx, verbs.WCRDMARead); err != nil {
		return err
	}
	s.st.Reads++
	s.st.Bytes += int(src.Size)
	got := buf[:src.Size]
	rpingPattern(want[:src.Size], ping)
	if !bytes.Equal(got, want[:src.Size]) && s.st.Problem == "" {
		s.st.Problem = fmt.Sprintf("ping %d: read %q, want %q", ping, cstring(got), cstring(want[:src.Size]))
	}
	s.ping(got)
	if err := s.rpingSendInfo(rpingInfo{}); err != nil { // go ahead
		return err
	}
	sink, err := s.rpingRecv(ctx)
	if err != nil {
		return s.rpingEnd(err, true)
	}
	n := len(cstring(got)) + 1
	if n > int(sink.Size) {
		return peerErrorf("ping %d: the client's sink size is %d, the data %d bytes", ping, sink.Size, n)
	}
	if err := s.qp.PostSend(WR{ID: 201, Op: verbs.OpRDMAWrite, Off: rpingRDMA, N: n, RemoteAddr: sink.Buf, RKey: sink.RKey}); err != nil {
		return err
	}
	if _, err := s.await(ctx, verbs.WCRDMAWrite); err != nil {
		return err
	}
	s.st.Writes++
	s.st.Bytes += n
	return s.rpingSendInfo(rpingInfo{}) // go ahead
}

// rpingEnd ends the server's loop: a flush while waiting for the next
// ping is the client's disconnect, which ends a complete run
// (errRpingEnd); within a ping it is a problem.
func (s *Session) rpingEnd(err error, within bool) error {
	if !errors.Is(err, ErrFlushed) {
		return err
	}
	defer func() { s.st.Verified = s.st.Problem == "" }()
	s.st.PeerDisconnect = true
	switch {
	case within:
		s.st.Problem = fmt.Sprintf("the client disconnected within ping %d", s.st.Iterations)
	case s.cfg.Count > 0 && s.st.Iterations != s.cfg.Count:
		s.st.Problem = fmt.Sprintf("%d pings, want %d", s.st.Iterations, s.cfg.Count)
	case s.st.Iterations == 0:
		s.st.Problem = "no ping"
	}
	return errRpingEnd
}

// rpingClient is rping -c -V -C N: N pings, each checked, then disconnect.
func rpingClient(ctx context.Context, s *Session) (bool, error) {
	size := rpingSize(s.cfg.Options)
	count := s.cfg.Count
	if count == 0 {
		count = rpingClientCount
	}
	m := s.qp.Mem()
	start := m[rpingStart(s.cfg.Options) : rpingStart(s.cfg.Options)+size]
	sink := m[rpingRDMA : rpingRDMA+size]
	s.st.Check = "pattern"
	for ping := range count {
		rpingPattern(start, ping)
		if err := s.rpingSendInfo(rpingInfo{Buf: s.qp.Addr() + uint64(rpingStart(s.cfg.Options)), RKey: s.qp.RKey(), Size: uint32(size)}); err != nil {
			return false, err
		}
		if _, err := s.rpingRecv(ctx); err != nil { // the server read it
			return false, fmt.Errorf("ping %d, waiting for the read: %w", ping, err)
		}
		if err := s.rpingSendInfo(rpingInfo{Buf: s.qp.Addr() + rpingRDMA, RKey: s.qp.RKey(), Size: uint32(size)}); err != nil {
			return false, err
		}
		if _, err := s.rpingRecv(ctx); err != nil { // the server wrote it back
			return false, fmt.Errorf("ping %d, waiting for the write: %w", ping, err)
		}
		s.st.Bytes += 2 * size // the server's READ and WRITE
		if !bytes.Equal(start, sink) && s.st.Problem == "" {
			s.st.Problem = fmt.Sprintf("ping %d: data mismatch: %q came back for %q", ping, cstring(sink), cstring(start))
		}
		s.ping(sink)
		s.st.Iterations++
	}
	if err := s.drainPendingSends(ctx); err != nil {
		return false, err
	}
	s.st.Verified = s.st.Problem == ""
	return true, nil
}

// drainPendingSends waits until every SEND posted so far completed, so
// that the disconnect does not flush one the peer has not acknowledged.
func (s *Session) drainPendingSends(ctx context.Context) error {
	// rping posts one SEND per message: two per iteration.
	for s.st.Sent < 2*s.st.Iterations {
		if _, err := s.await(ctx, verbs.WCSend); err != nil {
			return err
		}
		s.st.Sent++
	}
	return nil
}

// ping hands a ping's data to OnPing, as rping -v prints it.
func (s *Session) ping(data []byte) {
	if s.cfg.Verbose && s.cfg.OnPing != nil {
		s.cfg.OnPing(cstring(data))
	}
}

// cstring is b up to its first NUL.
func cstring(b []byte) []byte {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return b[:i]
	}
	return b
}
