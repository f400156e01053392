package hostd_test

import (
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"github.com/ibcm/ibcm/internal/hostd"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// BenchmarkRawThroughDaemon is BenchmarkCmtimeThroughDaemon's run with the
// least a client can do: frames written and read by one goroutine a side,
// a REQUEST answered by an ACCEPT from the reader itself. It sets the
// daemon's own cost apart from a client library's: n CONNECTs at once
// until every reply, then n DISCONNECTs at once until every reply.
func BenchmarkRawThroughDaemon(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var conn, disc float64
			for range b.N {
				c, d := rawRun(b, n)
				conn, disc = conn+c, disc+d
			}
			b.ReportMetric(conn/float64(b.N), "raw-connect-ms")
			b.ReportMetric(disc/float64(b.N), "raw-disconnect-ms")
		})
	}
}

// frameConn is a client socket that calls and collects replies by op.
type frameConn struct {
	c       *net.UnixConn
	mu      sync.Mutex
	replies map[hostproto.Op]chan hostproto.Frame
	onEvent func(hostproto.Frame)
}

func dialFrames(b *testing.B, path, port string, onEvent func(hostproto.Frame)) *frameConn {
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		b.Fatal(err)
	}
	fc := &frameConn{c: c, replies: map[hostproto.Op]chan hostproto.Frame{}, onEvent: onEvent}
	for _, op := range []hostproto.Op{hostproto.OpHello, hostproto.OpListen, hostproto.OpConnect, hostproto.OpDisconnect, hostproto.OpAccept} {
		fc.replies[op] = make(chan hostproto.Frame, 4096)
	}
	go func() {
		buf := make([]byte, hostproto.MaxFrame+1)
		for {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			fr, err := hostproto.DecodeFromDaemon(buf[:n])
			if err != nil {
				panic(err)
			}
			if fr.Op >= hostproto.OpEvent && fr.Status == 0 {
				if fc.onEvent != nil {
					fc.onEvent(fr)
				}
				continue
			}
			fc.replies[fr.Op] <- fr
		}
	}()
	fc.send(hostproto.OpHello, 1, &hostproto.HelloReq{Port: port})
	<-fc.replies[hostproto.OpHello]
	return fc
}

func (fc *frameConn) send(op hostproto.Op, id uint64, body hostproto.Body) {
	f, err := hostproto.AppendFrame(nil, op, 0, id, body)
	if err != nil {
		panic(err)
	}
	fc.mu.Lock()
	defer fc.mu.Unlock()
	if _, err := fc.c.Write(f); err != nil {
		panic(err)
	}
}

func rawRun(b *testing.B, n int) (connectMS, disconnectMS float64) {
	f := umadfake.NewFabric()
	ta, err := f.AddPort(umadfake.PortConfig{LID: 1}).Transport(umad.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ta.Close()
	tb, err := f.AddPort(umadfake.PortConfig{LID: 2}).Transport(umad.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	s, err := hostd.New(hostd.Config{Group: -1, Ports: []hostd.Port{{Name: "a", Transport: ta}, {Name: "b", Transport: tb}}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	path := filepath.Join(b.TempDir(), "s")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = s.Serve(l) }()
	var pb *frameConn
	var next uint64 = 1000
	var qpn uint32 = 0x10000
	pb = dialFrames(b, path, "b", func(fr hostproto.Frame) {
		if r, ok := fr.Body.(*hostproto.RequestEvent); ok {
			next++
			qpn++
			pb.send(hostproto.OpAccept, next, &hostproto.AcceptReq{Handle: r.Handle, REP: wire.REP{LocalQPN: qpn}})
		}
	})
	defer pb.c.Close()
	pb.send(hostproto.OpListen, 2, &hostproto.ListenReq{ServiceID: 0x5000})
	<-pb.replies[hostproto.OpListen]
	pa := dialFrames(b, path, "a", nil)
	defer pa.c.Close()
	to := s.Manager("b").LocalAddr()
	start := time.Now()
	for i := range n {
		pa.send(hostproto.OpConnect, uint64(10+i), &hostproto.ConnectReq{To: to, REQ: wire.REQ{ServiceID: 0x5000, LocalQPN: uint32(0x100 + i)}})
	}
	handles := make([]uint64, 0, n)
	for range n {
		fr := <-pa.replies[hostproto.OpConnect]
		if fr.Status != 0 {
			b.Fatalf("connect: %v", fr.Body.(*hostproto.ErrorBody).Message)
		}
		handles = append(handles, fr.Body.(*hostproto.ConnInfo).Handle)
	}
	connectMS = float64(time.Since(start).Microseconds()) / 1000
	start = time.Now()
	for i, h := range handles {
		pa.send(hostproto.OpDisconnect, uint64(10+n+i), &hostproto.DisconnectReq{Handle: h})
	}
	for range n {
		<-pa.replies[hostproto.OpDisconnect]
	}
	disconnectMS = float64(time.Since(start).Microseconds()) / 1000
	return connectMS, disconnectMS
}
