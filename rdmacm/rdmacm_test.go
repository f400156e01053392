// Package rdmacm_test checks the C library librdmacm.so.1 (docs/rdmacm.md)
// without RDMA hardware: its ABI against rdma-core's and the Debian
// programs', and, against a fake ibcmd that decodes every frame with
// internal/hostproto, what a program sees and what the daemon is sent.
package rdmacm_test

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// A build of the library and the test program: as shipped, or with the
// address and undefined-behaviour sanitizers, which fail a run on a
// memory error the plain build would pass over.
type build struct {
	name, cflags string
	once         sync.Once
	dir          string
	err          error
}

var builds = []*build{
	{name: "plain"},
	{name: "sanitized", cflags: "-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"},
}

var tmpRoot string

// built builds b once per test binary, with the package's Makefile, into
// a directory of its own.
func (b *build) built(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		b.dir, b.err = os.MkdirTemp(tmpRoot, b.name)
		if b.err != nil {
			return
		}
		args := []string{"-s", "OUT=" + b.dir}
		if b.cflags != "" {
			args = append(args, "CFLAGS="+b.cflags)
		}
		out, err := exec.Command("make", args...).CombinedOutput()
		if err != nil {
			b.err = errors.New("make: " + err.Error() + "\n" + string(out))
		}
	})
	require.NoError(t, b.err)
	return b.dir
}

func built(t *testing.T) string { return builds[0].built(t) }

func TestMain(m *testing.M) {
	var err error
	if tmpRoot, err = os.MkdirTemp("", "rdmacm-build"); err != nil {
		panic(err)
	}
	code := m.Run()
	_ = os.RemoveAll(tmpRoot)
	os.Exit(code)
}

// symbols are the defined (or, with undefined, the imported) dynamic
// symbols of file whose version starts with RDMACM_, as "name@version".
func symbols(t *testing.T, file string, undefined bool) []string {
	t.Helper()
	f, err := elf.Open(file)
	require.NoError(t, err)
	defer f.Close()
	syms, err := f.DynamicSymbols()
	require.NoError(t, err)
	var out []string
	for _, s := range syms {
		if !strings.HasPrefix(s.Version, "RDMACM_") || (s.Section == elf.SHN_UNDEF) != undefined {
			continue
		}
		out = append(out, s.Name+"@"+s.Version)
	}
	return out
}

// The programs the library must serve, from Debian's rdmacm-utils.
var programs = []string{"rping", "ucmatose", "rdma_server", "rdma_client", "udaddy", "cmtime"}

func TestABI(t *testing.T) {
	lib := filepath.Join(built(t), "librdmacm.so.1")
	ours := symbols(t, lib, false)

	t.Run("soname", func(t *testing.T) {
		f, err := elf.Open(lib)
		require.NoError(t, err)
		defer f.Close()
		so, err := f.DynString(elf.DT_SONAME)
		require.NoError(t, err)
		assert.Equal(t, []string{"librdmacm.so.1"}, so)
	})
	t.Run("rdma-core's symbols and versions", func(t *testing.T) {
		sys, err := filepath.EvalSymlinks("/usr/lib/x86_64-linux-gnu/librdmacm.so.1")
		require.NoError(t, err)
		theirs := symbols(t, sys, false)
		require.NotEmpty(t, theirs)
		assert.ElementsMatch(t, theirs, ours)
	})
	for _, p := range programs {
		t.Run(p, func(t *testing.T) {
			path, err := exec.LookPath(p)
			require.NoError(t, err, "rdmacm-utils' %s (tools/deps.sh installs it)", p)
			imports := symbols(t, path, true)
			require.NotEmpty(t, imports)
			assert.Subset(t, ours, imports)
		})
	}
}

// fake is one client connection of a fake ibcmd.
type fake struct {
	t   *testing.T
	c   *net.UnixConn
	buf []byte
}

func (f *fake) read() (hostproto.Frame, error) {
	f.t.Helper()
	require.NoError(f.t, f.c.SetReadDeadline(time.Now().Add(20*time.Second)))
	n, err := f.c.Read(f.buf)
	if err != nil {
		return hostproto.Frame{}, err
	}
	return hostproto.DecodeToDaemon(f.buf[:n])
}

// expect reads the next frame: a request of op, decoded without error.
func (f *fake) expect(op hostproto.Op) hostproto.Frame {
	f.t.Helper()
	fr, err := f.read()
	require.NoError(f.t, err)
	require.Equal(f.t, op, fr.Op, "got %s, want %s", fr.Op, op)
	return fr
}

func (f *fake) send(op hostproto.Op, status hostproto.Status, req uint64, b hostproto.Body) {
	f.t.Helper()
	fr, err := hostproto.AppendFrame(nil, op, status, req, b)
	require.NoError(f.t, err)
	_, err = f.c.Write(fr)
	require.NoError(f.t, err)
}

func (f *fake) reply(fr hostproto.Frame, b hostproto.Body) {
	f.t.Helper()
	f.send(fr.Op, hostproto.StatusOK, fr.ReqID, b)
}

func (f *fake) event(e *hostproto.Event) {
	f.t.Helper()
	f.send(hostproto.OpEvent, hostproto.StatusOK, 0, e)
}

// garbage sends n frames the library must survive without harm (under
// the sanitizers, without a bad read): headers of any op, short or
// lying about their length, bodies of random bytes. They name no handle,
// listener or call of the program's (all at 1000 and above), so that the
// script goes on as if they had not come.
func (f *fake) garbage(n int) {
	f.t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	ops := []byte{0x80, 0x81, 0x82, 0x40, 0x41, 0x04, 0x05, 0x01, 0x13, 0x3f, 0x84, 0xff}
	for range n {
		b := make([]byte, rng.IntN(700))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		if len(b) >= hostproto.HeaderSize {
			b[0] = hostproto.Version
			b[1] = ops[rng.IntN(len(ops))]
			if rng.IntN(4) != 0 {
				binary.LittleEndian.PutUint32(b[4:], uint32(len(b)-hostproto.HeaderSize))
			}
			binary.LittleEndian.PutUint64(b[8:], 1000+rng.Uint64N(1<<40))
			if b[1] >= 0x80 {
				binary.LittleEndian.PutUint64(b[8:], 0)
			}
		}
		if len(b) >= hostproto.HeaderSize+24 {
			binary.LittleEndian.PutUint64(b[16:], 1000+rng.Uint64N(1<<40)) // a handle or listener
			binary.LittleEndian.PutUint64(b[24:], 1000+rng.Uint64N(1<<40)) // a call ID or handle
		}
		f.write(b)
	}
}

// write sends b as one packet, waiting while the library's socket is
// full. Go's Write waits only while bytes are left to send, so an empty
// packet is written here, through the poller, until the kernel takes it.
func (f *fake) write(b []byte) {
	f.t.Helper()
	if len(b) > 0 {
		_, err := f.c.Write(b)
		require.NoError(f.t, err)
		return
	}
	rc, err := f.c.SyscallConn()
	require.NoError(f.t, err)
	var werr error
	require.NoError(f.t, rc.Write(func(fd uintptr) bool {
		for _, werr = syscall.Write(int(fd), nil); errors.Is(werr, syscall.EINTR); {
			_, werr = syscall.Write(int(fd), nil)
		}
		return !errors.Is(werr, syscall.EAGAIN)
	}))
	require.NoError(f.t, werr)
}

// TestFakeEmptyPacket: the fake daemon's empty packet (garbage sends
// some) waits, as its other packets do, for room in a socket the library
// has not read yet, instead of failing the script.
func TestFakeEmptyPacket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "s")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	defer ln.Close()
	lib, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	defer lib.Close()
	c, err := ln.AcceptUnix()
	require.NoError(t, err)
	defer c.Close()

	// fill the socket until the kernel takes no more
	rc, err := c.SyscallConn()
	require.NoError(t, err)
	full, frame := 0, make([]byte, 300)
	require.NoError(t, rc.Control(func(fd uintptr) {
		for {
			if _, err := syscall.Write(int(fd), frame); err != nil {
				assert.ErrorIs(t, err, syscall.EAGAIN)
				return
			}
			full++
		}
	}))
	require.Positive(t, full)

	// the reader starts once the write has returned, or has had long
	// enough to fail
	wrote := make(chan struct{})
	read := make(chan []int, 1)
	go func() {
		select {
		case <-wrote:
		case <-time.After(200 * time.Millisecond):
		}
		var sizes []int
		buf := make([]byte, 1024)
		for len(sizes) <= full {
			n, err := lib.Read(buf)
			if n == 0 && errors.Is(err, io.EOF) {
				err = nil // how Go reads an empty packet
			}
			if err != nil {
				break
			}
			sizes = append(sizes, n)
		}
		read <- sizes
	}()
	f := &fake{t: t, c: c}
	f.write(nil)
	close(wrote)
	sizes := <-read
	require.Len(t, sizes, full+1)
	assert.Equal(t, 0, sizes[full], "the empty packet, after the ones before it")
}

func mad(t *testing.T, msg wire.Message) *wire.MAD {
	t.Helper()
	var buf [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{}, msg))
	m := new(wire.MAD)
	require.NoError(t, wire.DecodeMAD(buf[:], m))
	return m
}

const guid = 0x0002c90300001234

var portAddr = transport.Addr{LID: 1, QPN: 1, QKey: 0x80010000}

// hello answers the client's HELLO with a simulated port's description.
func (f *fake) hello() {
	f.t.Helper()
	fr := f.expect(hostproto.OpHello)
	assert.Equal(f.t, &hostproto.HelloReq{}, fr.Body, "a loopback id attaches to the daemon's first port")
	f.reply(fr, &hostproto.HelloReply{MaxEvents: 1024, MinTimeWait: time.Millisecond, MaxTimeWait: time.Second,
		Port: hostproto.PortBody{Name: "sim0", LocalGUID: guid, LocalAddr: portAddr,
			Port: qpattr.PortInfo{Num: 1, LID: 1, MTU: wire.MTU(5), CAAckDelay: 15, PacketLifeTime: 18, MaxRdAtomic: 16,
				PKeys: []uint16{0xffff}}},
		Ports: []string{"sim0"}})
}

// run starts the test program in mode against a fake daemon and runs
// script on its connection, once with each build; the program must then
// exit 0.
func run(t *testing.T, mode string, script func(f *fake)) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) { runBuild(t, b.built(t), mode, script) })
	}
}

func runBuild(t *testing.T, dir, mode string, script func(f *fake), env ...string) {
	sock := filepath.Join(t.TempDir(), "ibcmd.sock")
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: sock, Net: "unixpacket"})
	require.NoError(t, err)
	defer ln.Close()

	var out bytes.Buffer
	cmd := exec.Command(filepath.Join(dir, "rdmacm-client"), mode)
	// LeakSanitizer on: every id, event, call and daemon connection the
	// program let go of must be freed by the time it exits.
	cmd.Env = append(filterEnv(os.Environ()), "IBCMD_SOCKET="+sock, "LD_LIBRARY_PATH="+dir,
		"ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:verify_asan_link_order=0", "UBSAN_OPTIONS=print_stacktrace=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = &out, &out
	require.NoError(t, cmd.Start())
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("the program's output:\n%s", &out)
		}
	}()

	require.NoError(t, ln.SetDeadline(time.Now().Add(20*time.Second)))
	c, err := ln.AcceptUnix()
	require.NoError(t, err, "the library never connected")
	defer c.Close()
	f := &fake{t: t, c: c, buf: make([]byte, hostproto.MaxFrame+1)}
	script(f)
	if _, err := f.c.Read(f.buf[:1]); !errors.Is(err, net.ErrClosed) {
		assert.ErrorIs(t, err, io.EOF, "the program's last frame is its socket's end")
	}
	select {
	case <-exited:
		require.NoError(t, waitErr)
	case <-time.After(20 * time.Second):
		t.Fatal("the program did not exit")
	}
	assert.True(t, strings.HasSuffix(out.String(), "ok\n"), "the program's last line is ok")
}

// filterEnv drops IBCMD_PORT: the ids of the test attach to the daemon's
// first port, as an unset variable says.
func filterEnv(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "IBCMD_PORT=") {
			out = append(out, e)
		}
	}
	return out
}

func ipcm(t *testing.T, pd []byte) (wire.IPCMHeader, []byte) {
	t.Helper()
	var h wire.IPCMHeader
	require.NoError(t, h.Decode(pd))
	return h, pd[wire.IPCMHeaderSize:]
}

func TestActive(t *testing.T) {
	run(t, "active", func(f *fake) {
		f.hello()
		fr := f.expect(hostproto.OpConnect)
		c := fr.Body.(*hostproto.ConnectReq)
		assert.False(t, c.HasQP)
		assert.False(t, c.IP.IsValid(), "a loopback destination is the daemon's port itself, no IP")
		assert.Equal(t, portAddr, c.To)
		assert.Nil(t, c.PrivateData, "the private data travels in the REQ, after the IP CM header")
		r := &c.REQ
		assert.Equal(t, wire.IPServiceID(7471), r.ServiceID)
		assert.Equal(t, [5]uint8{1, 2, 5, 0, 32}, [5]uint8{r.ResponderResources, r.InitiatorDepth, r.RetryCount, r.RNRRetryCount, r.PrimaryTrafficClass})
		assert.True(t, r.EndToEndFlowControl)
		h, rest := ipcm(t, r.PrivateData[:])
		assert.Equal(t, uint8(4), h.IPVersion)
		assert.Equal(t, netip.MustParseAddr("127.0.0.1"), h.SrcIP)
		assert.Equal(t, netip.MustParseAddr("127.0.0.1"), h.DstIP)
		assert.Equal(t, "hello", string(rest[:5]))
		assert.Equal(t, make([]byte, len(rest)-5), rest[5:])

		rep := &wire.REP{LocalQPN: 0x77, StartingPSN: 9, ResponderResources: 2, InitiatorDepth: 1, RNRRetryCount: 7}
		require.NoError(t, rep.SetPrivateData([]byte("world")))
		f.event(&hostproto.Event{Handle: 7, CallID: fr.ReqID, Kind: 1, State: 2})
		f.event(&hostproto.Event{Handle: 7, Kind: 6, State: 7, Msg: mad(t, rep)})
		f.event(&hostproto.Event{Handle: 7, Kind: 7, State: 10, Sent: wire.AttrRTU})
		f.event(&hostproto.Event{Handle: 7, Kind: 8, State: 10})
		f.reply(fr, &hostproto.ConnInfo{Handle: 7, State: 10, Active: true})

		fr = f.expect(hostproto.OpDisconnect)
		assert.Equal(t, &hostproto.DisconnectReq{Handle: 7}, fr.Body)
		f.event(&hostproto.Event{Handle: 7, Kind: 13, State: 11})
		f.event(&hostproto.Event{Handle: 7, Kind: 16, State: 13})
		f.reply(fr, &hostproto.Empty{})
		fr = f.expect(hostproto.OpConnClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 7}, fr.Body)
		f.reply(fr, &hostproto.Empty{})

		// the second connection is rejected: its REJECTED event and then
		// CONNECT's error reply, which must not make a second event
		fr = f.expect(hostproto.OpConnect)
		r = &fr.Body.(*hostproto.ConnectReq).REQ
		assert.Equal(t, [4]uint8{16, 16, 7, 7}, [4]uint8{r.ResponderResources, r.InitiatorDepth, r.RetryCount, r.RNRRetryCount},
			"a NULL conn_param: librdmacm's defaults, the device's depths")
		rej := &wire.REJ{Reason: 28}
		require.NoError(t, rej.SetPrivateData([]byte("busy")))
		f.event(&hostproto.Event{Handle: 8, CallID: fr.ReqID, Kind: 1, State: 2})
		eb := hostproto.ErrorBody{Code: hostproto.StatusRejected, Detail: 28, PrivateData: rej.PrivateData[:]}
		f.event(&hostproto.Event{Handle: 8, Kind: 9, State: 0, Reason: 28, Msg: mad(t, rej), Err: eb})
		f.send(hostproto.OpConnect, hostproto.StatusRejected, fr.ReqID, &eb)
		fr = f.expect(hostproto.OpConnClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 8}, fr.Body)
		f.send(hostproto.OpConnClose, hostproto.StatusNoHandle, fr.ReqID, &hostproto.ErrorBody{Code: hostproto.StatusNoHandle})

		// the third ends with only a STATE event (kind 0), IDLE: the
		// program is told DISCONNECTED, and the library, its handle
		// gone, sends no CONN_CLOSE (the program's socket ends next)
		fr = f.expect(hostproto.OpConnect)
		assert.Equal(t, uint32(0x333), fr.Body.(*hostproto.ConnectReq).REQ.LocalQPN)
		f.event(&hostproto.Event{Handle: 9, CallID: fr.ReqID, Kind: 1, State: 2})
		f.event(&hostproto.Event{Handle: 9, Kind: 6, State: 7, Msg: mad(t, &wire.REP{LocalQPN: 0x444})})
		f.event(&hostproto.Event{Handle: 9, Kind: 8, State: 10})
		f.reply(fr, &hostproto.ConnInfo{Handle: 9, State: 10, Active: true})
		f.event(&hostproto.Event{Handle: 9, Kind: 0, State: 0, Err: hostproto.ErrorBody{Code: hostproto.StatusClosed}})

		// IPv6 (::1)
		fr = f.expect(hostproto.OpConnect)
		h, _ = ipcm(t, fr.Body.(*hostproto.ConnectReq).REQ.PrivateData[:])
		assert.Equal(t, wire.IPCMHeader{IPVersion: 6, SrcPort: h.SrcPort, SrcIP: netip.IPv6Loopback(), DstIP: netip.IPv6Loopback()}, h)
		f.event(&hostproto.Event{Handle: 10, CallID: fr.ReqID, Kind: 1, State: 2})
		f.event(&hostproto.Event{Handle: 10, Kind: 9, Reason: 28, Err: eb})
		f.send(hostproto.OpConnect, hostproto.StatusRejected, fr.ReqID, &eb)
		fr = f.expect(hostproto.OpConnClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 10}, fr.Body)
		f.send(hostproto.OpConnClose, hostproto.StatusNoHandle, fr.ReqID, &hostproto.ErrorBody{Code: hostproto.StatusNoHandle})
	})
}

func ipREQ(t *testing.T, data string) wire.REQ {
	t.Helper()
	r := wire.REQ{ServiceID: wire.IPServiceID(7471), LocalQPN: 0x1234, ResponderResources: 1, InitiatorDepth: 2,
		RetryCount: 7, RNRRetryCount: 7, PartitionKey: 0xffff, PathPacketPayloadMTU: wire.MTU(5)}
	h := wire.IPCMHeader{IPVersion: 4, SrcPort: 5000, SrcIP: netip.MustParseAddr("127.0.0.2"), DstIP: netip.MustParseAddr("127.0.0.1")}
	require.NoError(t, h.Encode(r.PrivateData[:]))
	copy(r.PrivateData[wire.IPCMHeaderSize:], data)
	return r
}

func TestPassive(t *testing.T) {
	run(t, "passive", func(f *fake) {
		f.hello()
		fr := f.expect(hostproto.OpListen)
		assert.Equal(t, &hostproto.ListenReq{ServiceID: wire.IPServiceID(7471), Backlog: 5}, fr.Body)
		f.reply(fr, &hostproto.ListenReply{Handle: 3, CommID: 100})

		f.send(hostproto.OpRequestEvent, 0, 0, &hostproto.RequestEvent{Listener: 3, Handle: 9, CommID: 200, From: portAddr, REQ: ipREQ(t, "ping")})
		f.event(&hostproto.Event{Handle: 9, Kind: 2, State: 3})
		// rdma_init_qp_attr before rdma_accept: the attributes of the
		// REP that rdma_accept then sends
		fr = f.expect(hostproto.OpRequestQPAttr)
		q := fr.Body.(*hostproto.RequestQPAttrReq)
		assert.Equal(t, [2]uint64{9, uint64(qpattr.RTR)}, [2]uint64{q.Handle, uint64(q.QPState)})
		psn := q.REP.StartingPSN
		assert.NotZero(t, psn)
		f.reply(fr, &hostproto.AttrReply{Attr: qpattr.Attr{State: qpattr.RTR, PathMTU: 5, DestQPN: 0x1234, RQPSN: psn,
			Mask: qpattr.MaskState | qpattr.MaskAV | qpattr.MaskPathMTU | qpattr.MaskDestQPN | qpattr.MaskRQPSN,
			AH:   qpattr.AH{DLID: 1, PortNum: 1}}})
		fr = f.expect(hostproto.OpAccept)
		a := fr.Body.(*hostproto.AcceptReq)
		assert.Equal(t, psn, a.REP.StartingPSN, "the REP whose attributes the program has")
		assert.Equal(t, uint64(9), a.Handle)
		assert.False(t, a.HasQP)
		assert.Nil(t, a.PrivateData, "the private data travels in the REP")
		p := &a.REP
		assert.Equal(t, uint32(0x2345), p.LocalQPN, "conn_param's qp_num, in the REP's 24 bits")
		assert.Equal(t, uint32(1), p.StartingPSN&1, "the PSN the library chose (always odd), in the REP's 24 bits")
		assert.Equal(t, "pong", string(p.PrivateData[:4]))
		assert.Equal(t, [4]uint8{1, 1, 7, 15}, [4]uint8{p.ResponderResources, p.InitiatorDepth, p.RNRRetryCount, p.TargetAckDelay})
		assert.True(t, p.EndToEndFlowControl)
		assert.Equal(t, uint64(guid), p.LocalCAGUID)
		f.event(&hostproto.Event{Handle: 9, Kind: 5, State: 6})
		f.event(&hostproto.Event{Handle: 9, Kind: 8, State: 10, Msg: mad(t, &wire.RTU{})})
		f.reply(fr, &hostproto.ConnInfo{Handle: 9, State: 10})

		f.send(hostproto.OpRequestEvent, 0, 0, &hostproto.RequestEvent{Listener: 3, Handle: 10, CommID: 201, From: portAddr, REQ: ipREQ(t, "again")})
		fr = f.expect(hostproto.OpReject)
		assert.Equal(t, &hostproto.RejectReq{Handle: 10, Reason: 28, PrivateData: []byte("no")}, fr.Body)
		f.reply(fr, &hostproto.Empty{})
		fr = f.expect(hostproto.OpConnClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 10}, fr.Body)
		f.reply(fr, &hostproto.Empty{})

		f.event(&hostproto.Event{Handle: 9, Kind: 14, State: 12, Msg: mad(t, &wire.DREQ{})})
		fr = f.expect(hostproto.OpConnClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 9}, fr.Body)
		// a request the program never reads goes with its listener:
		// rejected, as the kernel destroys it
		f.send(hostproto.OpRequestEvent, 0, 0, &hostproto.RequestEvent{Listener: 3, Handle: 11, CommID: 202, From: portAddr, REQ: ipREQ(t, "late")})
		f.event(&hostproto.Event{Handle: 11, Kind: 2, State: 3})
		f.reply(fr, &hostproto.Empty{})
		fr = f.expect(hostproto.OpListenerClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 3}, fr.Body)
		f.reply(fr, &hostproto.Empty{})
		fr = f.expect(hostproto.OpConnClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 11}, fr.Body)
		f.reply(fr, &hostproto.Empty{})
	})
}

func sidrMAD(t *testing.T, r *wire.SIDRRep) []byte {
	t.Helper()
	var buf [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{}, r))
	return buf[:]
}

func TestUD(t *testing.T) {
	run(t, "ud", func(f *fake) {
		f.hello()
		fr := f.expect(hostproto.OpResolveSIDR)
		s := fr.Body.(*hostproto.ResolveSIDRReq)
		assert.Equal(t, portAddr, s.To)
		assert.Equal(t, wire.UDPServiceID(7174), s.ServiceID)
		assert.Equal(t, uint16(0xffff), s.PKey)
		require.Len(t, s.PrivateData, wire.IPCMHeaderSize+5)
		h, rest := ipcm(t, s.PrivateData)
		assert.Equal(t, netip.MustParseAddr("127.0.0.1"), h.DstIP)
		assert.Equal(t, "ud-hi", string(rest))
		rep := wire.SIDRRep{QPN: 0x55, QKey: 0x01234567, ServiceID: s.ServiceID}
		require.NoError(t, rep.SetPrivateData([]byte("ud-ok")))
		f.reply(fr, &hostproto.SIDRRepReply{Rep: rep})

		fr = f.expect(hostproto.OpResolveSIDR)
		rep = wire.SIDRRep{Status: 1, ServiceID: s.ServiceID}
		f.send(hostproto.OpResolveSIDR, hostproto.StatusSIDR, fr.ReqID,
			&hostproto.ErrorBody{Code: hostproto.StatusSIDR, Detail: 1, Info: sidrMAD(t, &rep)})

		fr = f.expect(hostproto.OpListen)
		assert.Equal(t, &hostproto.ListenReq{ServiceID: wire.UDPServiceID(7174)}, fr.Body)
		f.reply(fr, &hostproto.ListenReply{Handle: 4})
		req := wire.SIDRReq{ServiceID: wire.UDPServiceID(7174), PartitionKey: 0xffff}
		hdr := wire.IPCMHeader{IPVersion: 4, SrcPort: 6000, SrcIP: netip.MustParseAddr("127.0.0.2"), DstIP: netip.MustParseAddr("127.0.0.1")}
		require.NoError(t, hdr.Encode(req.PrivateData[:]))
		req.PrivateData[wire.IPCMHeaderSize] = 'q'
		f.send(hostproto.OpSIDRRequestEvent, 0, 0, &hostproto.SIDRRequestEvent{Listener: 4, Handle: 12, From: portAddr, Req: req})
		fr = f.expect(hostproto.OpSIDRReply)
		r := fr.Body.(*hostproto.SIDRReplyReq)
		assert.Equal(t, uint64(12), r.Handle)
		assert.Equal(t, [3]uint32{0, 0x66, 0x01234567}, [3]uint32{uint32(r.Params.Status), r.Params.QPN, r.Params.QKey})
		f.reply(fr, &hostproto.Empty{})
		f.send(hostproto.OpSIDRRequestEvent, 0, 0, &hostproto.SIDRRequestEvent{Listener: 4, Handle: 13, From: portAddr, Req: req})
		fr = f.expect(hostproto.OpSIDRReply)
		r = fr.Body.(*hostproto.SIDRReplyReq)
		assert.Equal(t, [2]uint64{13, 2}, [2]uint64{r.Handle, uint64(r.Params.Status)}, "a rejected SIDR request")
		f.reply(fr, &hostproto.Empty{})
		fr = f.expect(hostproto.OpListenerClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 4}, fr.Body)
		f.reply(fr, &hostproto.Empty{})
	})
}

// The ids of rdma_create_ep have no channel: their calls wait for the
// events they cause.
func TestEndpoints(t *testing.T) {
	t.Run("passive", func(t *testing.T) {
		run(t, "ep-passive", func(f *fake) {
			f.hello()
			fr := f.expect(hostproto.OpListen)
			f.reply(fr, &hostproto.ListenReply{Handle: 3})
			f.send(hostproto.OpRequestEvent, 0, 0, &hostproto.RequestEvent{Listener: 3, Handle: 9, From: portAddr, REQ: ipREQ(t, "")})
			f.event(&hostproto.Event{Handle: 9, Kind: 2, State: 3})
			fr = f.expect(hostproto.OpAccept)
			p := &fr.Body.(*hostproto.AcceptReq).REP
			assert.Equal(t, [2]uint8{2, 1}, [2]uint8{p.ResponderResources, p.InitiatorDepth},
				"a NULL conn_param answers the REQ's depths")
			f.event(&hostproto.Event{Handle: 9, Kind: 8, State: 10})
			f.reply(fr, &hostproto.ConnInfo{Handle: 9, State: 10})
			fr = f.expect(hostproto.OpDisconnect)
			f.event(&hostproto.Event{Handle: 9, Kind: 16, State: 13})
			f.reply(fr, &hostproto.Empty{})
			fr = f.expect(hostproto.OpConnClose)
			assert.Equal(t, &hostproto.HandleReq{Handle: 9}, fr.Body)
			f.reply(fr, &hostproto.Empty{})
			fr = f.expect(hostproto.OpListenerClose)
			f.reply(fr, &hostproto.Empty{})
		})
	})
	t.Run("active", func(t *testing.T) {
		run(t, "ep-active", func(f *fake) {
			f.hello()
			fr := f.expect(hostproto.OpConnect)
			_, rest := ipcm(t, fr.Body.(*hostproto.ConnectReq).REQ.PrivateData[:])
			assert.Equal(t, "sync", string(rest[:4]))
			f.event(&hostproto.Event{Handle: 5, CallID: fr.ReqID, Kind: 1, State: 2})
			eb := hostproto.ErrorBody{Code: hostproto.StatusRejected, Detail: 8}
			f.event(&hostproto.Event{Handle: 5, Kind: 9, Reason: 8, Err: eb})
			f.send(hostproto.OpConnect, hostproto.StatusRejected, fr.ReqID, &eb)
			fr = f.expect(hostproto.OpConnClose)
			f.send(hostproto.OpConnClose, hostproto.StatusNoHandle, fr.ReqID, &hostproto.ErrorBody{Code: hostproto.StatusNoHandle})
		})
	})
}

// When the daemon goes away, the program's connections end as the
// kernel's device removal ends them, and the channel's new calls fail.
func TestDaemonGone(t *testing.T) {
	run(t, "dead", func(f *fake) {
		f.hello()
		fr := f.expect(hostproto.OpConnect)
		f.event(&hostproto.Event{Handle: 1, CallID: fr.ReqID, Kind: 1, State: 2})
		fr = f.expect(hostproto.OpConnect)
		f.event(&hostproto.Event{Handle: 2, CallID: fr.ReqID, Kind: 1, State: 2})
		f.event(&hostproto.Event{Handle: 2, Kind: 6, State: 7, Msg: mad(t, &wire.REP{LocalQPN: 1})})
		f.event(&hostproto.Event{Handle: 2, Kind: 8, State: 10})
		f.garbage(500)
		// the QP_MODIFY of a connection without a QP is refused, with a
		// message
		f.send(hostproto.OpQPModify, 0, 9001, &hostproto.QPModifyReq{Handle: 2, QPN: 0x99, Wait: true,
			Attrs: []qpattr.Attr{{State: qpattr.Init}, {State: qpattr.RTR}, {State: qpattr.RTS}}})
		var r hostproto.Frame
		for r.ReqID != 9001 { // after the answers to the garbage's daemon calls
			var err error
			r, err = f.read()
			require.NoError(t, err)
		}
		assert.Equal(t, hostproto.OpQPModify, r.Op)
		assert.Equal(t, hostproto.StatusQPModify, r.Status)
		assert.NotEmpty(t, r.Body.(*hostproto.ErrorBody).Message)
		require.NoError(t, f.c.Close())
	})
}

// TestDisconnectRefused: rdma_disconnect, as librdmacm's, returns the
// daemon's refusal of a live connection's DISCONNECT (EINVAL for an
// invalid state), instead of leaving the program to wait for a
// DISCONNECTED that will not come; a DISCONNECT the daemon takes returns
// at its DREQ_SENT event, not at the reply that comes only once the
// connection has ended.
func TestDisconnectRefused(t *testing.T) {
	run(t, "disconnect", func(f *fake) {
		f.hello()
		fr := f.expect(hostproto.OpConnect)
		f.event(&hostproto.Event{Handle: 5, CallID: fr.ReqID, Kind: 1, State: 2})
		f.event(&hostproto.Event{Handle: 5, Kind: 6, State: 7, Msg: mad(t, &wire.REP{LocalQPN: 0x77})})
		f.event(&hostproto.Event{Handle: 5, Kind: 7, State: 10, Sent: wire.AttrRTU})
		f.event(&hostproto.Event{Handle: 5, Kind: 8, State: 10})
		f.reply(fr, &hostproto.ConnInfo{Handle: 5, State: 10, Active: true})

		fr = f.expect(hostproto.OpDisconnect)
		assert.Equal(t, &hostproto.DisconnectReq{Handle: 5}, fr.Body)
		eb := &hostproto.ErrorBody{Code: hostproto.StatusInvalidState, State: 10}
		f.send(hostproto.OpDisconnect, hostproto.StatusInvalidState, fr.ReqID, eb)

		fr = f.expect(hostproto.OpDisconnect)
		f.event(&hostproto.Event{Handle: 5, Kind: 13, State: 11})
		q := f.expect(hostproto.OpConnQPAttr)
		f.send(hostproto.OpConnQPAttr, hostproto.StatusInvalidState, q.ReqID, eb)
		f.event(&hostproto.Event{Handle: 5, Kind: 16, State: 13})
		f.reply(fr, &hostproto.Empty{})
		fr = f.expect(hostproto.OpConnClose)
		assert.Equal(t, &hostproto.HandleReq{Handle: 5}, fr.Body)
		f.reply(fr, &hostproto.Empty{})
	})
}

// TestDestroyQPDuringMove: a program that destroys its QP while the
// library's reader thread is moving it for the daemon's QP_MODIFY (the
// libibverbs stand-in pauses that move until a QP is destroyed, or half a
// second) has its destroy wait for the move, so that the QP is not freed
// under it (the sanitizers would see the move read it) and the move is
// answered.
func TestDestroyQPDuringMove(t *testing.T) {
	for _, b := range builds {
		t.Run(b.name, func(t *testing.T) {
			dir := b.built(t)
			runBuild(t, dir, "qp-destroy", func(f *fake) {
				f.hello()
				fr := f.expect(hostproto.OpConnect)
				c := fr.Body.(*hostproto.ConnectReq)
				require.True(t, c.HasQP)
				f.event(&hostproto.Event{Handle: 1, CallID: fr.ReqID, Kind: 1, State: 2})
				f.send(hostproto.OpQPModify, 0, 9002, &hostproto.QPModifyReq{Handle: 1, QPN: c.QPN, Wait: true,
					Attrs: []qpattr.Attr{{State: qpattr.Err, Mask: qpattr.MaskState}}})
				r := f.expect(hostproto.OpQPModify)
				assert.Equal(t, uint64(9002), r.ReqID)
				assert.Equal(t, hostproto.StatusOK, r.Status, "the QP moved before it went")
				fr = f.expect(hostproto.OpConnClose)
				assert.Equal(t, &hostproto.HandleReq{Handle: 1}, fr.Body)
				f.reply(fr, &hostproto.Empty{})
			}, "LD_PRELOAD="+filepath.Join(dir, "fakeverbs.so"))
		})
	}
}

// roceBuild is the library built to read the sysfs tree in testdata (a
// device sim0, whose port 1 has 10.0.0.2 as a RoCE v1 GID at index 1 and
// a RoCE v2 GID at index 2) instead of the host's.
var roceBuild = &build{name: "roce"}

// roceDir is roceBuild's directory, built once.
func roceDir(t *testing.T) string {
	t.Helper()
	sys, err := filepath.Abs("testdata/sys")
	require.NoError(t, err)
	roceBuild.cflags = `-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=all -DIBCM_SYSFS='"` + sys + `"'`
	return roceBuild.built(t)
}

// TestRoCE: on a RoCE port the library finds the device, port and GID
// index of an IP in sysfs, attaches to the daemon's port named after the
// device, and sends the daemon a REQ built whole (so that the daemon keeps
// its private data and parameters) to the peer's GID, and SIDR requests
// over a GRH.
func TestRoCE(t *testing.T) {
	dir := roceDir(t)
	peer := transport.Addr{LID: 0xffff, QPN: 1, QKey: 0x80010000, GRH: true, GIDIndex: 2, HopLimit: 64,
		GID: netip.MustParseAddr("::ffff:10.0.0.1").As16()}
	runBuild(t, dir, "roce", func(f *fake) {
		fr := f.expect(hostproto.OpHello)
		assert.Equal(t, &hostproto.HelloReq{Port: "sim0/1"}, fr.Body, "the port named after 10.0.0.2's device")
		f.reply(fr, &hostproto.HelloReply{
			Port: hostproto.PortBody{Name: "sim0/1", LocalGUID: guid,
				LocalAddr: transport.Addr{LID: 0xffff, QPN: 1, QKey: 0x80010000, GRH: true, GIDIndex: 2},
				Port: qpattr.PortInfo{Num: 1, RoCE: true, LID: 0, MTU: wire.MTU(3), CAAckDelay: 15, PacketLifeTime: 18,
					MaxRdAtomic: 16, GIDIndex: 2, GID: netip.MustParseAddr("::ffff:10.0.0.2").As16()}}})

		fr = f.expect(hostproto.OpConnect)
		c := fr.Body.(*hostproto.ConnectReq)
		assert.True(t, c.HasQP)
		assert.Equal(t, peer, c.To)
		assert.False(t, c.IP.IsValid(), "the REQ is built whole: the daemon must not build an IP REQ over it")
		r := &c.REQ
		assert.Equal(t, uint16(0xffff), r.PartitionKey)
		assert.Equal(t, wire.MTU(3), r.PathPacketPayloadMTU)
		assert.Equal(t, [3]uint8{20, 20, 15}, [3]uint8{r.RemoteCMResponseTimeout, r.LocalCMResponseTimeout, r.MaxCMRetries})
		assert.Equal(t, [4]uint8{1, 1, 6, 0}, [4]uint8{r.ResponderResources, r.InitiatorDepth, r.RetryCount, r.RNRRetryCount},
			"the program's parameters, RNR retry 0 included")
		assert.NotZero(t, r.StartingPSN)
		assert.Equal(t, [2]uint16{0xffff, 0xffff}, [2]uint16{r.PrimaryLocalPortLID, r.PrimaryRemotePortLID})
		assert.Equal(t, wire.GID(netip.MustParseAddr("::ffff:10.0.0.2").As16()), r.PrimaryLocalPortGID)
		assert.Equal(t, wire.GID(peer.GID), r.PrimaryRemotePortGID)
		assert.Equal(t, uint8(64), r.PrimaryHopLimit)
		assert.Equal(t, uint8(19), r.PrimaryLocalAckTimeout, "RDMA_OPTION_ID_ACK_TIMEOUT")
		assert.False(t, r.PrimarySubnetLocal)
		h, rest := ipcm(t, r.PrivateData[:])
		assert.Equal(t, netip.MustParseAddr("10.0.0.2"), h.SrcIP)
		assert.Equal(t, netip.MustParseAddr("10.0.0.1"), h.DstIP)
		assert.Equal(t, "roce", string(rest[:4]))
		f.event(&hostproto.Event{Handle: 1, CallID: fr.ReqID, Kind: 1, State: 2})
		eb := hostproto.ErrorBody{Code: hostproto.StatusRejected, Detail: 28}
		f.event(&hostproto.Event{Handle: 1, Kind: 9, Reason: 28, Err: eb})
		f.send(hostproto.OpConnect, hostproto.StatusRejected, fr.ReqID, &eb)
		fr = f.expect(hostproto.OpConnClose)
		f.send(hostproto.OpConnClose, hostproto.StatusNoHandle, fr.ReqID, &hostproto.ErrorBody{Code: hostproto.StatusNoHandle})

		fr = f.expect(hostproto.OpResolveSIDR)
		assert.Equal(t, peer, fr.Body.(*hostproto.ResolveSIDRReq).To)
		f.reply(fr, &hostproto.SIDRRepReply{Rep: wire.SIDRRep{QPN: 0x77, QKey: 0x01234567, ServiceID: wire.UDPServiceID(7174)}})
	}, "LD_PRELOAD="+filepath.Join(dir, "fakeverbs.so"))
}

// TestRoCEEndpoints: rdma_create_ep's QP attributes leave the QP's type
// to the addrinfo (rdma_client and rdma_server give them zeroed but for
// the capabilities): the QP of an active endpoint, and that of a request
// rdma_get_request hands, is RC, with the libibverbs stand-in refusing a
// type no device has.
func TestRoCEEndpoints(t *testing.T) {
	dir := roceDir(t)
	pre := "LD_PRELOAD=" + filepath.Join(dir, "fakeverbs.so")
	hello := func(f *fake) {
		fr := f.expect(hostproto.OpHello)
		assert.Equal(t, &hostproto.HelloReq{Port: "sim0/1"}, fr.Body)
		f.reply(fr, &hostproto.HelloReply{
			Port: hostproto.PortBody{Name: "sim0/1", LocalGUID: guid,
				LocalAddr: transport.Addr{LID: 0xffff, QPN: 1, QKey: 0x80010000, GRH: true, GIDIndex: 2},
				Port: qpattr.PortInfo{Num: 1, RoCE: true, MTU: wire.MTU(3), CAAckDelay: 15, PacketLifeTime: 18,
					MaxRdAtomic: 16, GIDIndex: 2, GID: netip.MustParseAddr("::ffff:10.0.0.2").As16()}}})
	}
	t.Run("active", func(t *testing.T) { runBuild(t, dir, "roce-ep-active", hello, pre) })
	t.Run("passive", func(t *testing.T) {
		runBuild(t, dir, "roce-ep-passive", func(f *fake) {
			hello(f)
			fr := f.expect(hostproto.OpListen)
			f.reply(fr, &hostproto.ListenReply{Handle: 3})
			req := ipREQ(t, "")
			f.send(hostproto.OpRequestEvent, 0, 0, &hostproto.RequestEvent{Listener: 3, Handle: 9, From: portAddr, REQ: req})
			f.event(&hostproto.Event{Handle: 9, Kind: 2, State: 3})
			fr = f.expect(hostproto.OpConnClose)
			assert.Equal(t, &hostproto.HandleReq{Handle: 9}, fr.Body, "the request, never accepted, goes with its id")
			f.reply(fr, &hostproto.Empty{})
			fr = f.expect(hostproto.OpListenerClose)
			f.reply(fr, &hostproto.Empty{})
		}, pre)
	})
}
