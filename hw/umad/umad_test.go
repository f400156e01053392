package umad_test

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/hw/umad"
	"github.com/ibcm/ibcm/hw/umad/umadfake"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	return c
}

// cmMAD builds a CM MAD: class 0x07 v2, the given method, attribute and TID.
func cmMAD(method uint8, attr uint16, tid uint64) transport.Packet {
	var p transport.Packet
	wire.PutBaseVersion(&p.MAD, wire.BaseVersion)
	wire.PutMgmtClass(&p.MAD, wire.MgmtClassCM)
	wire.PutClassVersion(&p.MAD, wire.ClassVersionCM)
	wire.PutMethod(&p.MAD, method)
	wire.PutTID(&p.MAD, tid)
	wire.PutAttrID(&p.MAD, wire.AttrID(attr))
	return p
}

func rocePair(t *testing.T) (*umadfake.Fabric, *umad.Transport, *umad.Transport) {
	t.Helper()
	fab := umadfake.NewFabric()
	pa := fab.AddPort(umadfake.PortConfig{RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.1")})
	pb := fab.AddPort(umadfake.PortConfig{RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2")})
	a, err := pa.Transport(umad.Options{RequestTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pb.Transport(umad.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return fab, a, b
}

func TestTwoEndpointsExchangeMADs(t *testing.T) {
	_, a, b := rocePair(t)
	la, lb := a.LocalAddr(), b.LocalAddr()
	if !la.GRH || la.QPN != 1 || la.QKey != transport.GSIQKey || la.IP() != netip.MustParseAddr("::ffff:10.0.0.1") {
		t.Fatalf("local addr %+v", la)
	}

	// A sends a "REQ" to B.
	req := cmMAD(umad.MethodSend, 0x0010, 0xdeadbeef_00001234)
	req.MAD[wire.HeaderSize] = 0x42 // the first body byte
	req.Addr = transport.Addr{GRH: true, GID: lb.GID, GIDIndex: la.GIDIndex}
	if err := a.Send(ctx(t), &req); err != nil {
		t.Fatal(err)
	}
	got, err := b.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != 0 || wire.PeekMgmtClass(&got.MAD) != wire.MgmtClassCM || got.MAD[wire.HeaderSize] != 0x42 || wire.PeekAttrID(&got.MAD) != 0x10 {
		t.Fatalf("B got %+v", got)
	}
	tid := wire.PeekTID(&got.MAD)
	if uint32(tid) != 0x1234 || tid>>32 == 0xdeadbeef {
		t.Fatalf("TID %#x: want low half kept and high half rewritten", tid)
	}
	if !got.Addr.GRH || got.Addr.GID != la.GID || got.Addr.QPN != 1 || got.Addr.QKey != transport.GSIQKey {
		t.Fatalf("B's view of A: %+v", got.Addr)
	}

	// B answers to the address it received from, reusing the TID.
	rep := cmMAD(umad.MethodSend, 0x0013, tid)
	rep.Addr = got.Addr
	if err := b.Send(ctx(t), &rep); err != nil {
		t.Fatal(err)
	}
	back, err := a.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if wire.PeekAttrID(&back.MAD) != 0x13 || uint32(wire.PeekTID(&back.MAD)) != 0x1234 {
		t.Fatalf("A got %x", back.MAD[:wire.HeaderSize])
	}
}

func TestIBLIDRouting(t *testing.T) {
	fab := umadfake.NewFabric()
	a, err := fab.AddPort(umadfake.PortConfig{LID: 1}).Transport(umad.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := fab.AddPort(umadfake.PortConfig{LID: 2}).Transport(umad.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if a.LocalAddr().GRH {
		t.Fatal("IB port must not force a GRH")
	}
	p := cmMAD(umad.MethodSend, 0x15, 7)
	p.Addr = transport.Addr{LID: 2, SL: 3}
	if err := a.Send(ctx(t), &p); err != nil {
		t.Fatal(err)
	}
	got, err := b.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if got.Addr.LID != 1 || got.Addr.SL != 3 || got.Addr.GRH {
		t.Fatalf("addr %+v", got.Addr)
	}
}

func TestRegistrationRefusedWhenKernelCMOwnsClass(t *testing.T) {
	fab := umadfake.NewFabric()
	p := fab.AddPort(umadfake.PortConfig{LID: 1})
	p.ReserveMethod(wire.MgmtClassCM, wire.ClassVersionCM, umad.MethodSend) // ib_cm is loaded
	_, err := p.Transport(umad.Options{})
	if !errors.Is(err, umad.ErrClassInUse) {
		t.Fatalf("err = %v, want ErrClassInUse", err)
	}
	if !errors.Is(err, errEINVAL) {
		t.Fatalf("err = %v, want it to wrap EINVAL", err)
	}
}

func TestSecondTransportOnSamePortRefused(t *testing.T) {
	fab := umadfake.NewFabric()
	p := fab.AddPort(umadfake.PortConfig{LID: 1})
	a, err := p.Transport(umad.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Transport(umad.Options{}); !errors.Is(err, umad.ErrClassInUse) {
		t.Fatalf("second open: %v", err)
	}
	a.Close()
	// Close unregistered the agents: the class is free again.
	b, err := p.Transport(umad.Options{})
	if err != nil {
		t.Fatalf("after close: %v", err)
	}
	b.Close()
}

func TestGetAgentOptionalWhenGetTaken(t *testing.T) {
	fab := umadfake.NewFabric()
	p := fab.AddPort(umadfake.PortConfig{LID: 1})
	p.ReserveMethod(wire.MgmtClassCM, wire.ClassVersionCM, umad.MethodGet)
	tr, err := p.Transport(umad.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if tr.ClassPortInfo() {
		t.Fatal("Get agent registered although Get is taken")
	}
	if _, get := tr.AgentIDs(); get != -1 {
		t.Fatalf("get agent %d", get)
	}
}

func TestClassPortInfoGetAndResponse(t *testing.T) {
	_, a, b := rocePair(t)
	if !b.ClassPortInfo() {
		t.Fatal("B has no Get agent")
	}
	get := cmMAD(umad.MethodGet, 0x0001, 0x77)
	get.Addr = transport.Addr{GRH: true, GID: b.LocalAddr().GID}
	if err := a.Send(ctx(t), &get); err != nil {
		t.Fatal(err)
	}
	in, err := b.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if wire.PeekMethod(&in.MAD) != umad.MethodGet {
		t.Fatalf("method %#x", wire.PeekMethod(&in.MAD))
	}
	resp := in
	wire.PutMethod(&resp.MAD, umad.MethodGetResp)
	if err := b.Send(ctx(t), &resp); err != nil {
		t.Fatal(err)
	}
	out, err := a.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != 0 || wire.PeekMethod(&out.MAD) != umad.MethodGetResp || wire.PeekTID(&out.MAD) != wire.PeekTID(&in.MAD) {
		t.Fatalf("A got status %d %x", out.Status, out.MAD[:wire.HeaderSize])
	}
	// The answered Get produces no timeout report.
	c, cancel := context.WithTimeout(context.Background(), 150*time.Millisecond)
	defer cancel()
	if p, err := a.Recv(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("unexpected %+v %v", p, err)
	}
}

func TestUnclaimedGetAnsweredByMADLayer(t *testing.T) {
	fab := umadfake.NewFabric()
	a, err := fab.AddPort(umadfake.PortConfig{LID: 1}).Transport(umad.Options{RequestTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := fab.AddPort(umadfake.PortConfig{LID: 2}).Transport(umad.Options{NoClassPortInfo: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	get := cmMAD(umad.MethodGet, 0x0001, 5)
	get.Addr.LID = 2
	if err := a.Send(ctx(t), &get); err != nil {
		t.Fatal(err)
	}
	out, err := a.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if wire.PeekMethod(&out.MAD) != umad.MethodGetResp || wire.PeekStatus(&out.MAD) != 0x000c {
		t.Fatalf("got %x", out.MAD[:wire.HeaderSize])
	}
}

// On Soft-RoCE (no process_mad) nobody answers the Get: the sender gets a
// timeout report, as observed against the real kernel in tools/interop.
func TestUnclaimedGetOnSoftRoCETimesOut(t *testing.T) {
	fab := umadfake.NewFabric()
	a, err := fab.AddPort(umadfake.PortConfig{LID: 1}).Transport(umad.Options{RequestTimeout: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := fab.AddPort(umadfake.PortConfig{LID: 2, NoProcessMAD: true}).Transport(umad.Options{NoClassPortInfo: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	get := cmMAD(umad.MethodGet, 0x0001, 6)
	get.Addr.LID = 2
	if err := a.Send(ctx(t), &get); err != nil {
		t.Fatal(err)
	}
	out, err := a.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != umad.StatusTimeout || uint32(wire.PeekTID(&out.MAD)) != 6 {
		t.Fatalf("status %d MAD %x", out.Status, out.MAD[:wire.HeaderSize])
	}
}

func TestSendTimeoutReported(t *testing.T) {
	fab, a, b := rocePair(t)
	drops := 0
	fab.SetDrop(func(_, _ *umadfake.Port, mad []byte) bool { drops++; return true })
	get := cmMAD(umad.MethodGet, 0x0001, 0xabcd)
	get.Addr = transport.Addr{GRH: true, GID: b.LocalAddr().GID}
	if err := a.SendTimeout(ctx(t), &get, 20*time.Millisecond, 2); err != nil {
		t.Fatal(err)
	}
	rep, err := a.Recv(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Status != umad.StatusTimeout {
		t.Fatalf("status %d, want %d", rep.Status, umad.StatusTimeout)
	}
	if uint32(wire.PeekTID(&rep.MAD)) != 0xabcd || wire.PeekMethod(&rep.MAD) != umad.MethodGet {
		t.Fatalf("report MAD header %x", rep.MAD[:wire.HeaderSize])
	}
	if rep.MAD[wire.HeaderSize] != 0 || rep.MAD[100] != 0 {
		t.Fatal("a report carries only the 24-byte MAD header")
	}
	if drops != 3 {
		t.Fatalf("%d transmissions, want 1 + 2 retries", drops)
	}
}

func TestDuplicateOutstandingSendRejected(t *testing.T) {
	fab, a, b := rocePair(t)
	fab.SetDrop(func(_, _ *umadfake.Port, _ []byte) bool { return true })
	get := cmMAD(umad.MethodGet, 0x0001, 9)
	get.Addr = transport.Addr{GRH: true, GID: b.LocalAddr().GID}
	if err := a.SendTimeout(ctx(t), &get, time.Second, 0); err != nil {
		t.Fatal(err)
	}
	err := a.SendTimeout(ctx(t), &get, time.Second, 0)
	if !errors.Is(err, umad.ErrSendRejected) {
		t.Fatalf("duplicate: %v", err)
	}
}

func TestRecvContextAndClose(t *testing.T) {
	_, a, _ := rocePair(t)
	c, cancel := context.WithTimeout(context.Background(), 30*time.Millisecond)
	defer cancel()
	if _, err := a.Recv(c); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("deadline: %v", err)
	}
	c2, cancel2 := context.WithCancel(context.Background())
	go func() { time.Sleep(10 * time.Millisecond); cancel2() }()
	if _, err := a.Recv(c2); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancel: %v", err)
	}
	errc := make(chan error, 1)
	go func() { _, err := a.Recv(context.Background()); errc <- err }()
	time.Sleep(10 * time.Millisecond)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("blocked Recv after Close: %v", err)
	}
	p := cmMAD(umad.MethodSend, 0x10, 1)
	if err := a.Send(context.Background(), &p); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Send after Close: %v", err)
	}
	if err := a.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestFakeEnablePKeyAfterRegisterRefused(t *testing.T) {
	fab := umadfake.NewFabric()
	p := fab.AddPort(umadfake.PortConfig{LID: 1})
	tr, err := p.Transport(umad.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	f := p.Open()
	defer f.Close()
	// Registering an agent (class 0x09 here) makes ENABLE_PKEY too late.
	arg := make([]byte, 40)
	binary.NativeEndian.PutUint32(arg[4:], 1)
	arg[8], arg[9] = 0x09, 1
	binary.NativeEndian.PutUint64(arg[16:], 1<<umad.MethodGet)
	if err := f.Ioctl(umadfake.IoctlRegisterAgent2, arg); err != nil {
		t.Fatal(err)
	}
	if err := f.Ioctl(umadfake.IoctlEnablePKey, nil); !errors.Is(err, errEINVAL) {
		t.Fatalf("late ENABLE_PKEY: %v", err)
	}
	if err := f.Ioctl(0x1b99, nil); !errors.Is(err, errENOTTY) {
		t.Fatalf("unknown ioctl: %v", err)
	}
}

// writeSysfs lays out a fake sysfs and /dev tree for one RoCE port.
func writeSysfs(t *testing.T) umad.Config {
	root := t.TempDir()
	sys, dev := filepath.Join(root, "sys"), filepath.Join(root, "dev")
	w := func(p, s string) {
		p = filepath.Join(sys, p)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	w("class/infiniband_mad/abi_version", "5")
	w("class/infiniband_mad/umad0/ibdev", "rxe0")
	w("class/infiniband_mad/umad0/port", "1")
	w("class/infiniband_mad/issm0/ibdev", "rxe0")
	w("class/infiniband/rxe0/node_guid", "5054:00ff:fe12:3402")
	pd := "class/infiniband/rxe0/ports/1/"
	w(pd+"state", "4: ACTIVE")
	w(pd+"link_layer", "Ethernet")
	w(pd+"lid", "0x0")
	w(pd+"sm_lid", "0x0")
	w(pd+"gids/0", "fe80:0000:0000:0000:5054:00ff:fe12:3402")
	w(pd+"gids/1", "0000:0000:0000:0000:0000:ffff:0a00:0002")
	w(pd+"gids/2", "0000:0000:0000:0000:0000:0000:0000:0000")
	w(pd+"gid_attrs/types/0", "IB/RoCE v1")
	w(pd+"gid_attrs/types/1", "RoCE v2")
	w(pd+"pkeys/0", "0xffff")
	return umad.Config{SysfsRoot: sys, DevRoot: dev}
}

func TestSysfsDiscovery(t *testing.T) {
	cfg := writeSysfs(t)
	ports, err := cfg.Ports()
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 1 {
		t.Fatalf("%d ports", len(ports))
	}
	p := ports[0]
	if p.Device != "rxe0" || p.Port != 1 || !p.Active() || !p.RoCE() || p.NodeGUID != 0x505400fffe123402 {
		t.Fatalf("port %+v", p)
	}
	if len(p.GIDs) != 2 || p.DefaultGIDIndex() != 1 || p.GIDs[1].IP() != netip.MustParseAddr("::ffff:10.0.0.2") {
		t.Fatalf("gids %+v default %d", p.GIDs, p.DefaultGIDIndex())
	}
	if len(p.PKeys) != 1 || p.PKeys[0] != 0xffff {
		t.Fatalf("pkeys %v", p.PKeys)
	}
	if p.DevPath != filepath.Join(cfg.DevRoot, "umad0") {
		t.Fatalf("dev path %s", p.DevPath)
	}
	if _, err := cfg.FindPort("mlx5_0", 1); !errors.Is(err, umad.ErrNoPort) {
		t.Fatalf("FindPort: %v", err)
	}
}

func TestOpenThroughSysfsWithFakeDevice(t *testing.T) {
	cfg := writeSysfs(t)
	fab := umadfake.NewFabric()
	fp := fab.AddPort(umadfake.PortConfig{RoCE: true, GID: netip.MustParseAddr("::ffff:10.0.0.2")})
	var opened string
	tr, err := umad.Open(umad.Options{Config: cfg, OpenDevice: func(path string) (umad.Device, error) {
		opened = path
		return fp.Open(), nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	if opened != filepath.Join(cfg.DevRoot, "umad0") {
		t.Fatalf("opened %s", opened)
	}
	la := tr.LocalAddr()
	if la.GIDIndex != 1 || la.IP() != netip.MustParseAddr("::ffff:10.0.0.2") || !la.GRH {
		t.Fatalf("local %+v", la)
	}
	_, err = umad.Open(umad.Options{Config: cfg, SourceGID: netip.MustParseAddr("::ffff:10.9.9.9"),
		OpenDevice: func(string) (umad.Device, error) { return fp.Open(), nil }})
	if !errors.Is(err, umad.ErrNoPort) {
		t.Fatalf("unknown source GID: %v", err)
	}
}

func TestNoDeviceErrors(t *testing.T) {
	_, err := umad.Open(umad.Options{Config: umad.Config{SysfsRoot: t.TempDir()}})
	if !errors.Is(err, umad.ErrNoDevice) {
		t.Fatalf("no sysfs: %v", err)
	}
	// sysfs present but /dev/infiniband missing (e.g. no udev): name ib_umad.
	cfg := writeSysfs(t)
	_, err = umad.Open(umad.Options{Config: cfg})
	if !errors.Is(err, umad.ErrNoDevice) {
		t.Fatalf("no device node: %v", err)
	}
	if want := "ib_umad"; !contains(err.Error(), want) {
		t.Fatalf("error %q does not name %s", err, want)
	}
}

func TestOpenFilePermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root bypasses file permissions")
	}
	p := filepath.Join(t.TempDir(), "umad0")
	if err := os.WriteFile(p, nil, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := umad.OpenFile(p); !errors.Is(err, umad.ErrPermission) {
		t.Fatalf("err %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

// A cm.Manager over umad takes its CA GUID from the port (LocalGUIDer): the
// node GUIDs reach the peer in the REQ and the REP.
func TestManagerGUIDFromPort(t *testing.T) {
	_, a, b := rocePair(t)
	if a.LocalGUID() != a.Port().NodeGUID || a.LocalGUID() == 0 {
		t.Fatalf("LocalGUID %#x, node GUID %#x", a.LocalGUID(), a.Port().NodeGUID)
	}
	ma, err := cm.NewManager(a, cm.ManagerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer ma.Close()
	mb, err := cm.NewManager(b, cm.ManagerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	defer mb.Close()
	c := ctx(t)
	l, err := mb.Listen(c, cm.ListenParams{ServiceID: 0x77})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan uint64, 1)
	go func() {
		req, err := l.Accept(c)
		if err != nil {
			got <- 0
			return
		}
		got <- req.REQ().LocalCAGUID
		_, _ = req.Accept(c, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x22}})
	}()
	conn, err := ma.Connect(c, &cm.ConnectParams{To: b.LocalAddr(), REQ: wire.REQ{ServiceID: 0x77, LocalQPN: 0x11}})
	if err != nil {
		t.Fatal(err)
	}
	if g := <-got; g != a.Port().NodeGUID {
		t.Errorf("REQ Local CA GUID %#x, want %#x", g, a.Port().NodeGUID)
	}
	if g := conn.RemoteGUID(); g != b.Port().NodeGUID {
		t.Errorf("REP Local CA GUID %#x, want %#x", g, b.Port().NodeGUID)
	}
	if err := conn.Disconnect(c, nil); err != nil {
		t.Fatal(err)
	}
}
