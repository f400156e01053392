package umad_test

import (
	"context"
	"encoding/binary"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
)

// BenchmarkSendRecvFake moves MADs from one transport to another over the
// in-process fake device: ns/op and allocs/op are per MAD, Send and Recv
// together, the fake's own work included (it copies each record three
// times).
func BenchmarkSendRecvFake(b *testing.B) {
	fab := umadfake.NewFabric()
	pa := fab.AddPort(umadfake.PortConfig{RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.1")})
	pb := fab.AddPort(umadfake.PortConfig{RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2")})
	ta, err := pa.Transport(umad.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer ta.Close()
	tb, err := pb.Transport(umad.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer tb.Close()
	p := cmMAD(umad.MethodSend, 0x0010, 1)
	p.Addr = transport.Addr{GRH: true, GID: tb.LocalAddr().GID}
	ctx := context.Background()
	// A window of MADs in flight, as a burst of REQs: the sender stays
	// at most 32 ahead of the receiver.
	credit := make(chan struct{}, 32)
	b.ReportAllocs()
	b.ResetTimer()
	go func() {
		for i := 0; i < b.N; i++ {
			credit <- struct{}{}
			if err := ta.Send(ctx, &p); err != nil {
				panic(err)
			}
		}
	}()
	for i := 0; i < b.N; i++ {
		if _, err := tb.Recv(ctx); err != nil {
			b.Fatal(err)
		}
		<-credit
	}
}

// loopDevice is a Device with no kernel and no fake behind it, to time
// the transport's own work: writes are counted and dropped; reads return a
// received CM MAD at once, up to limit (then they block until Close).
type loopDevice struct {
	rec    []byte
	writes atomic.Int64
	reads  atomic.Int64
	limit  int64
	mu     sync.Mutex
	closed chan struct{}
}

func newLoopDevice(limit int64) *loopDevice {
	// struct ib_user_mad_hdr with P_Key index (64 bytes) and a 256-byte
	// MAD; a GRH from ::ffff:10.0.0.2.
	rec := make([]byte, 64+256)
	binary.BigEndian.PutUint32(rec[20:], 1) // source QPN
	rec[32] = 1                             // GRH
	copy(rec[36:52], netip.MustParseAddr("::ffff:10.0.0.2").AsSlice())
	mad := (*[wire.MADSize]byte)(rec[64:])
	wire.PutBaseVersion(mad, wire.BaseVersion)
	wire.PutMgmtClass(mad, wire.MgmtClassCM)
	wire.PutClassVersion(mad, wire.ClassVersionCM)
	wire.PutMethod(mad, umad.MethodSend)
	wire.PutAttrID(mad, wire.AttrREQ)
	return &loopDevice{rec: rec, limit: limit, closed: make(chan struct{})}
}

func (d *loopDevice) Read(b []byte) (int, error) {
	if d.reads.Add(1) > d.limit {
		<-d.closed
		return 0, umad.ErrDeviceClosed
	}
	return copy(b, d.rec), nil
}

func (d *loopDevice) Write(b []byte) (int, error) {
	d.writes.Add(1)
	return len(b), nil
}

func (d *loopDevice) Ioctl(req uint, arg []byte) error { return nil }

func (d *loopDevice) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	select {
	case <-d.closed:
	default:
		close(d.closed)
	}
	return nil
}

func loopTransport(b *testing.B, limit int64) (*umad.Transport, *loopDevice) {
	b.Helper()
	d := newLoopDevice(limit)
	port := umad.Port{Device: "loop0", Port: 1, State: "ACTIVE", LinkLayer: "Ethernet", NodeGUID: 0xa1,
		GIDs: []umad.GID{{Index: 0, GID: netip.MustParseAddr("::ffff:10.0.0.1").As16(), Type: "RoCE v2"}}, PKeys: []uint16{0xffff}}
	t, err := umad.NewTransport(d, port, umad.Options{NoClassPortInfo: true})
	if err != nil {
		b.Fatal(err)
	}
	return t, d
}

// BenchmarkSendLoop is Send alone: the header, the record, one write.
func BenchmarkSendLoop(b *testing.B) {
	t, d := loopTransport(b, 0)
	defer t.Close()
	p := cmMAD(umad.MethodSend, 0x0010, 1)
	p.Addr = transport.Addr{GRH: true, GID: netip.MustParseAddr("::ffff:10.0.0.2").As16()}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := t.Send(ctx, &p); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if d.writes.Load() != int64(b.N) {
		b.Fatalf("%d writes for %d sends", d.writes.Load(), b.N)
	}
}

// BenchmarkRecvLoop is the receive path alone: the reading goroutine
// decoding records as fast as the device gives them, and Recv.
func BenchmarkRecvLoop(b *testing.B) {
	t, _ := loopTransport(b, int64(b.N)+1<<20)
	defer t.Close()
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	bad := 0
	for i := 0; i < b.N; i++ {
		p, err := t.Recv(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if wire.PeekMgmtClass(&p.MAD) != wire.MgmtClassCM {
			bad++
		}
	}
	b.StopTimer()
	if bad > 0 {
		b.Fatalf("%d MADs not of class 0x07", bad)
	}
}

// BenchmarkFindPort is Open's discovery on a sysfs tree shaped like
// Soft-RoCE's: a 1024-entry GID table (two entries in use, each with a
// type) and 64 P_Keys, so 1,100 small files per port.
func BenchmarkFindPort(b *testing.B) {
	sys := filepath.Join(b.TempDir(), "sys")
	w := func(p, s string) {
		p = filepath.Join(sys, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	w("class/infiniband_mad/abi_version", "5")
	w("class/infiniband_mad/umad0/ibdev", "rxe0")
	w("class/infiniband_mad/umad0/port", "1")
	w("class/infiniband/rxe0/node_guid", "5054:00ff:fe12:3402")
	pd := "class/infiniband/rxe0/ports/1/"
	w(pd+"state", "4: ACTIVE")
	w(pd+"link_layer", "Ethernet")
	w(pd+"lid", "0x0")
	w(pd+"sm_lid", "0x0")
	for i := range 1024 {
		g := "0000:0000:0000:0000:0000:0000:0000:0000"
		switch i {
		case 0:
			g = "fe80:0000:0000:0000:5054:00ff:fe12:3402"
			w(pd+"gid_attrs/types/0", "IB/RoCE v1")
		case 1:
			g = "0000:0000:0000:0000:0000:ffff:0a00:0002"
			w(pd+"gid_attrs/types/1", "RoCE v2")
		}
		w(pd+"gids/"+strconv.Itoa(i), g)
	}
	for i := range 64 {
		w(pd+"pkeys/"+strconv.Itoa(i), "0xffff")
	}
	cfg := umad.Config{SysfsRoot: sys}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p, err := cfg.FindPort("rxe0", 1)
		if err != nil || len(p.GIDs) != 2 || len(p.PKeys) != 64 {
			b.Fatalf("%+v %v", p, err)
		}
	}
}
