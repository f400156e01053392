package hostd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// client is one socket connection: one program's ids and event stream.
type client struct {
	s      *Server
	conn   *net.UnixConn
	cred   unix.Ucred
	groups []uint32 // supplementary groups, read from /proc at connect
	id     uint64
	user   *user

	ctx    context.Context // ends when the client does
	cancel context.CancelFunc
	// The frames to write, bounded (Quota.Events): full means cut off.
	qmu     sync.Mutex
	queue   []outFrame
	writing int           // frames the writer has taken and not yet written
	qclosed bool          // the writer has stopped
	wake    chan struct{} // a frame was queued

	badFrames int // frames that did not decode; the reader's own

	// Set by HELLO, on the reader goroutine, before any call runs.
	port      *port
	lapPolicy bool
	noSent    bool // HelloNoSentEvents: pushEvent leaves out the SentOnly kinds
	packed    bool // HelloPacked: packets of several frames, both ways; set under qmu
	noEcho    bool // HelloNoEcho: CONNECT's and ACCEPT's replies carry no REQ, REP
	// lapSilent: the client let a LAP_POLICY go unanswered; it is not
	// asked again (each wait holds back every event of the port).
	lapSilent atomic.Bool

	mu         sync.Mutex
	dead       bool
	handles    map[uint64]*entry
	nextHandle uint64
	calls      map[uint64]context.CancelFunc   // the client's calls in progress, by request ID
	dcalls     map[uint64]chan hostproto.Frame // the daemon's calls waiting for the client's reply
	nextDReq   uint64
	callsWG    sync.WaitGroup
	killOnce   sync.Once
	why        string
}

type entryKind uint8

const (
	kindListener entryKind = iota + 1
	kindConn               // a connection: one Connect made, or a request delivered (and maybe accepted)
	kindSIDR
)

// entry is what one of the client's handles names.
type entry struct {
	kind entryKind

	// kindListener
	l      *cm.Listener
	listen *listenEntry
	slots  chan struct{} // the backlog: one slot per request delivered and not yet answered
	closed chan struct{} // closed with the listener: its pumps stop

	// kindConn
	conn       *cm.Conn
	req        *cm.Request // a request delivered by a listener, until answered
	answered   bool        // ACCEPT, REJECT or DELAY came: its slot is free
	release    func()      // frees the request's backlog slot
	connecting bool        // a CONNECT in progress; conn is set by its first event (REQ_SENT)
	qpn        uint32      // the local QP number its CONNECT or ACCEPT gave (port.takeQPN)
	hasQPN     bool

	// let go: the handle is gone (forget); no QP number is taken for it
	// after, since nothing would give it back. It, qpn and hasQPN are
	// guarded by the client's mu.
	letGo bool

	// kindSIDR
	sidr *cm.SIDRRequest
}

func newClient(s *Server, c *net.UnixConn, cred unix.Ucred, id uint64, u *user) *client {
	ctx, cancel := context.WithCancel(context.Background())
	cl := &client{s: s, conn: c, cred: cred, id: id, ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), handles: map[uint64]*entry{},
		calls: map[uint64]context.CancelFunc{}, dcalls: map[uint64]chan hostproto.Frame{}}
	cl.groups = procGroups(cred.Pid)
	cl.user = u
	return cl
}

func (c *client) logAttrs(more ...any) []any {
	return append([]any{"client", c.id, "uid", c.cred.Uid, "gid", c.cred.Gid, "pid", c.cred.Pid}, more...)
}

// peerCred is what the kernel says of the process at the other end.
func peerCred(c *net.UnixConn) (unix.Ucred, error) {
	var cred *unix.Ucred
	var gerr error
	rc, err := c.SyscallConn()
	if err != nil {
		return unix.Ucred{}, err
	}
	if err := rc.Control(func(fd uintptr) {
		cred, gerr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return unix.Ucred{}, err
	}
	if gerr != nil {
		return unix.Ucred{}, gerr
	}
	return *cred, nil
}

// procGroups reads the supplementary groups of pid, for the privileged
// group's check: SO_PEERCRED gives the primary group only. A process gone
// already has none.
func procGroups(pid int32) []uint32 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "Groups:")
		if !ok {
			continue
		}
		var gs []uint32
		for _, g := range strings.Fields(rest) {
			if v, err := strconv.ParseUint(g, 10, 32); err == nil {
				gs = append(gs, uint32(v))
			}
		}
		return gs
	}
	return nil
}

func (c *client) run() {
	go c.write()
	c.read()
	c.kill("")
}

// read takes the client's frames until it goes away: a packet is one
// frame, or, once the client said HelloPacked, several.
func (c *client) read() {
	buf := make([]byte, hostproto.MaxFrame+1)
	for {
		n, err := c.conn.Read(buf)
		if err != nil || n == 0 {
			return
		}
		if !c.packed {
			if !c.take(buf[:n]) {
				return
			}
			continue
		}
		for rest := buf[:n]; len(rest) > 0; {
			var frame []byte
			frame, rest = hostproto.NextFrame(rest)
			if !c.take(frame) {
				return
			}
		}
	}
}

// take decodes and runs one frame of the client's, and reports whether
// the connection goes on.
func (c *client) take(frame []byte) bool {
	fr, err := hostproto.DecodeToDaemon(frame)
	if err != nil {
		return c.refuse(frame, fr, err)
	}
	if fr.Op == hostproto.OpQPModify || fr.Op == hostproto.OpLAPPolicy {
		c.mu.Lock()
		ch := c.dcalls[fr.ReqID]
		delete(c.dcalls, fr.ReqID)
		c.mu.Unlock()
		if ch != nil {
			ch <- fr
		}
		return true
	}
	c.dispatch(fr)
	return true
}

// maxBadFrameWarnings is how many bad frames of one client are logged as
// warnings.
const maxBadFrameWarnings = 10

// refuse answers a frame that does not decode, and reports whether the
// connection goes on: it does when the header could be read (the reply
// names its request ID), not when the frame's own framing is wrong.
func (c *client) refuse(frame []byte, fr hostproto.Frame, err error) bool {
	b := hostproto.ProtoErrorBody(err)
	keep := len(frame) >= hostproto.HeaderSize && len(frame) <= hostproto.MaxFrame && !errors.Is(err, hostproto.ErrVersion)
	reqID := fr.ReqID
	if !keep {
		reqID = 0
	}
	// A client may send bad frames as fast as it can write: the first
	// few are warned of, the rest only at debug level.
	c.badFrames++
	lvl := slog.LevelWarn
	if c.badFrames > maxBadFrameWarnings {
		lvl = slog.LevelDebug
	}
	c.s.log.Log(context.Background(), lvl, "bad frame", c.logAttrs("op", fr.Op, "err", err, "bad_frames", c.badFrames)...)
	if fr.Op == hostproto.OpQPModify || fr.Op == hostproto.OpLAPPolicy {
		// A reply of the client's that does not decode: the daemon's call
		// fails as if the client had refused it.
		c.mu.Lock()
		ch := c.dcalls[fr.ReqID]
		delete(c.dcalls, fr.ReqID)
		c.mu.Unlock()
		if ch != nil {
			ch <- hostproto.Frame{Header: hostproto.Header{Op: fr.Op, Status: b.Code}, Body: &b}
		}
		return keep
	}
	if !c.push(fr.Op, b.Code, reqID, &b) {
		return false
	}
	if !keep {
		// Let the writer send the refusal before the socket closes.
		c.flushThenKill("malformed frame: " + err.Error())
	}
	return keep
}

// flushThenKill cuts the client off once its queued frames are written
// (or after a second).
func (c *client) flushThenKill(why string) {
	deadline := time.Now().Add(time.Second)
	for c.queued() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(5 * time.Millisecond)
	c.kill(why)
}

// queued is how many frames wait to be written, the one being written
// included.
func (c *client) queued() int {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	return len(c.queue) + c.writing
}

// write sends the queued frames in order, taking all that wait at once.
func (c *client) write() {
	var batch []outFrame
	w := frameWriter{c: c}
	for {
		select {
		case <-c.wake:
		case <-c.ctx.Done():
			c.closeQueue()
			return
		}
		// The calls and events that woke the writer come in bursts: the
		// goroutines already running to queue theirs go first, so that
		// a packet takes them too rather than one write each.
		runtime.Gosched()
		c.qmu.Lock()
		batch, c.queue = c.queue, batch[:0]
		c.writing = len(batch)
		w.packed = c.packed
		c.qmu.Unlock()
		err := w.writeAll(batch)
		c.qmu.Lock()
		c.writing = 0
		c.qmu.Unlock()
		if err != nil {
			c.closeQueue()
			c.kill("write: " + err.Error())
			return
		}
	}
}

// frameWriter is the writer's state from batch to batch: its buffers, and
// the ends told.
type frameWriter struct {
	c       *client
	scratch []byte // the events' encoding, reused frame after frame
	pkt     []byte // a packet of several frames being filled (HelloPacked)
	told    endTold
	// packed: the client's HelloPacked as of the batch being written,
	// read with the batch under qmu, since a HELLO may come while the
	// writer writes the replies to calls made before it.
	packed bool
}

// writeAll writes the frames of batch, in order: each in a packet of its
// own, or, to a client that said HelloPacked, as many to a packet as fit.
// Each frame is let go of (its buffers, its count in the user's queued
// events) as it is written or dropped, the rest at the first error.
func (w *frameWriter) writeAll(batch []outFrame) error {
	c := w.c
	if w.told == nil {
		w.told = endTold{}
	}
	var err error
	for i := range batch {
		if err == nil {
			err = w.writeOne(&batch[i])
		}
		c.user.events.Add(-1)
		batch[i].free()
		batch[i] = outFrame{}
	}
	if err == nil && len(w.pkt) > 0 {
		_, err = c.conn.Write(w.pkt)
	}
	w.pkt = w.pkt[:0]
	return err
}

// writeOne encodes f (unless it tells nothing new) and writes it, or adds
// it to the packet being filled.
func (w *frameWriter) writeOne(f *outFrame) error {
	c := w.c
	f.fill()
	if w.told.skip(f) {
		return nil
	}
	if f.event && w.packed {
		return w.packEvent(f)
	}
	b, err := f.bytes(w.scratch[:0])
	if err != nil {
		c.s.log.Error("event does not encode", c.logAttrs("err", err)...)
		return nil
	}
	if f.event && b != nil {
		w.scratch = b
	}
	if b == nil {
		return nil
	}
	if !w.packed {
		_, err = c.conn.Write(b)
		return err
	}
	if w.pkt == nil {
		w.pkt = make([]byte, 0, hostproto.MaxFrame) // filled without growing
	}
	if len(w.pkt)+len(b) > hostproto.MaxFrame {
		if _, err := c.conn.Write(w.pkt); err != nil {
			return err
		}
		w.pkt = w.pkt[:0]
	}
	w.pkt = append(w.pkt, b...)
	return nil
}

// packEvent encodes the event f straight into the packet being filled
// (HelloPacked), rather than apart and then copied: most frames of a
// burst are events. One that takes the packet past MaxFrame starts the
// next packet, once the frames before it are written.
func (w *frameWriter) packEvent(f *outFrame) error {
	c := w.c
	if w.pkt == nil {
		w.pkt = make([]byte, 0, hostproto.MaxFrame)
	}
	start := len(w.pkt)
	b, err := hostproto.AppendFrame(w.pkt, hostproto.OpEvent, 0, 0, f.ev)
	if err != nil {
		c.s.log.Error("event does not encode", c.logAttrs("err", err)...)
		return nil
	}
	if len(b) > hostproto.MaxFrame && start > 0 {
		if _, err := c.conn.Write(b[:start]); err != nil {
			return err
		}
		b = b[:copy(b, b[start:])]
	}
	w.pkt = b
	return nil
}

// outFrame is a frame waiting for the writer: encoded (in a buffer of
// framePool's), or an event whose connection's state and error are read,
// and which is encoded, only when it is written.
type outFrame struct {
	b     *[]byte
	event bool
	ev    *hostproto.Event // of eventBufs
	conn  *cm.Conn
	// A STATE event's (pushState): its handle, and what it tells.
	handle uint64
	state  stateFrame
}

type stateFrame uint8

const (
	stateOther stateFrame = iota
	stateEnd              // the connection ended: Done closed
	stateExit             // its id is free: the handle is gone
)

// endTold is the writer's record of the handles whose end an event
// (endsEverywhere) has told with its error, so that the STATE event of
// the same end is not sent again. It forgets a handle at its
// TIMEWAIT_EXIT or final STATE, or all of them past maxEndTold (a STATE
// then goes as usual).
type endTold map[uint64]struct{}

const maxEndTold = 4096

// skip reports whether f tells nothing the client has not been told,
// and notes what f tells; on the writer's goroutine, once f is encoded.
func (t endTold) skip(f *outFrame) bool {
	switch {
	case f.state == stateEnd && f.ev.State != cm.StateIdle:
		if _, told := t[f.handle]; told {
			delete(t, f.handle)
			return true
		}
	case f.state == stateExit:
		delete(t, f.handle)
	case f.ev != nil && cm.EventKind(f.ev.Kind) == cm.EventTimeWaitExit:
		delete(t, f.ev.Handle)
	case f.ev != nil && f.ev.Err.Code != hostproto.StatusOK && endsEverywhere(cm.EventKind(f.ev.Kind)):
		if len(t) >= maxEndTold {
			clear(t)
		}
		t[f.ev.Handle] = struct{}{}
	}
	return false
}

// endsEverywhere: the event kinds every client ends its connection at,
// the C library's included (docs/ibcmd-protocol.md): a STATE event after
// one of them, with the same error, changes nothing.
func endsEverywhere(k cm.EventKind) bool {
	switch k {
	case cm.EventRejected, cm.EventStale, cm.EventTimedOut, cm.EventDREQReceived, cm.EventDisconnected:
		return true
	}
	return false
}

// bytes is f encoded: its frame, or its event appended to scratch with
// its connection's state and error now.
func (f *outFrame) bytes(scratch []byte) ([]byte, error) {
	if !f.event {
		if f.b == nil {
			return nil, nil
		}
		return *f.b, nil
	}
	return hostproto.AppendFrame(scratch, hostproto.OpEvent, 0, 0, f.ev)
}

// fill reads an event's connection's state and error now.
func (f *outFrame) fill() {
	if !f.event {
		return
	}
	f.ev.State, f.ev.Err = stateOf(f.conn)
	if f.state == stateExit {
		f.ev.State = cm.StateIdle
	}
}

// free gives f's buffers back once it is written.
func (f *outFrame) free() {
	if f.b != nil {
		putFrameBuf(f.b)
	}
	if f.ev != nil {
		if f.ev.Raw != nil {
			madBufs.Put(f.ev.Raw)
		}
		*f.ev = hostproto.Event{}
		eventBufs.Put(f.ev)
	}
}

// framePool holds the buffers the frames of push are encoded in: most
// frames are replies and events written at once, under a kilobyte (a
// CONNECT's or ACCEPT's reply is about 600 bytes: its REQ's and REP's
// room is there, zero, when they are left out).
var framePool = sync.Pool{New: func() any { b := make([]byte, 0, 1024); return &b }}

// maxPooledFrame bounds the buffers framePool keeps: a rare big frame
// (a HELLO reply naming many ports) is left to the collector.
const maxPooledFrame = 4096

func putFrameBuf(b *[]byte) {
	if cap(*b) <= maxPooledFrame {
		*b = (*b)[:0]
		framePool.Put(b)
	}
}

// eventBufs holds the events waiting in the queues (pushEvent), given
// back once written: a queue of pointers stays small when a burst fills
// it.
var eventBufs = sync.Pool{New: func() any { return new(hostproto.Event) }}

// madBufs holds the 256-byte copies of the messages the Manager's events
// carry (port.onEvent), given back once the event is written.
var madBufs = sync.Pool{New: func() any { return new([wire.MADSize]byte) }}

// closeQueue ends the queue: what waits in it is dropped, and nothing
// more is queued, so that the user's count of queued frames comes back to
// what its other clients hold.
func (c *client) closeQueue() {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	c.qclosed = true
	c.user.events.Add(-int64(len(c.queue)))
	c.queue = nil
}

// push queues a frame for the client without waiting: a client whose
// queue (or its user's) is full is cut off. It reports whether the frame
// was queued. The queue grows with what waits in it, so that an idle
// client costs nothing.
func (c *client) push(op hostproto.Op, status hostproto.Status, reqID uint64, b hostproto.Body) bool {
	buf := framePool.Get().(*[]byte)
	f, err := hostproto.AppendFrame((*buf)[:0], op, status, reqID, b)
	if err != nil {
		c.s.log.Error("frame does not encode", c.logAttrs("op", op, "err", err)...)
		if reqID == 0 || op >= hostproto.OpQPModify {
			return false
		}
		eb := hostproto.ProtoErrorBody(fmt.Errorf("%w: reply does not encode: %v", hostproto.ErrInternal, err))
		if f, err = hostproto.AppendFrame(f[:0], op, eb.Code, reqID, &eb); err != nil {
			putFrameBuf(buf)
			return false
		}
	}
	*buf = f
	return c.enqueue(outFrame{b: buf})
}

// pushState queues a STATE event (port.onConnEnd) for conn's handle h,
// which the writer fills with the connection's state and error when it
// writes it, as it does every event; with exit its state is IDLE. One
// that tells an end (not exit, its state not IDLE) is dropped by the
// writer, unencoded, when an event that ends the connection in every
// client, with its error, went before it (endTold): it would tell
// nothing new.
func (c *client) pushState(h uint64, conn *cm.Conn, exit bool) bool {
	ev := eventBufs.Get().(*hostproto.Event)
	*ev = hostproto.Event{Handle: h, Kind: hostproto.EventKindState, CommID: uint32(conn.ID())}
	st := stateEnd
	if exit {
		st = stateExit
	}
	return c.enqueue(outFrame{event: true, ev: ev, conn: conn, handle: h, state: st})
}

// pushEvent queues an event, encoded when it is written, with its
// connection's state and error then.
func (c *client) pushEvent(e *hostproto.Event, conn *cm.Conn) bool {
	if c.noSent && hostproto.SentOnly(e.Kind) && e.CallID == 0 {
		if e.Raw != nil {
			madBufs.Put(e.Raw)
		}
		return true
	}
	ev := eventBufs.Get().(*hostproto.Event)
	*ev = *e
	return c.enqueue(outFrame{event: true, ev: ev, conn: conn})
}

func (c *client) enqueue(f outFrame) bool {
	c.mu.Lock()
	dead := c.dead
	c.mu.Unlock()
	if dead {
		return false
	}
	if c.user.events.Add(1) > int64(c.s.cfg.Quota.UserEvents) {
		c.user.events.Add(-1)
		go c.kill("the user's queued events are over quota")
		return false
	}
	c.qmu.Lock()
	if c.qclosed {
		c.qmu.Unlock()
		c.user.events.Add(-1)
		return false
	}
	if len(c.queue)+c.writing >= c.s.cfg.Quota.Events {
		c.qmu.Unlock()
		c.user.events.Add(-1)
		go c.kill("event queue full")
		return false
	}
	c.queue = append(c.queue, f)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return true
}

// kill ends the client once: its calls are cancelled, the socket closed,
// and its ids torn down (in the background: kill may run where the
// Manager's events are told, and tearing down waits for them).
func (c *client) kill(why string) {
	c.killOnce.Do(func() {
		c.mu.Lock()
		c.dead = true
		c.why = why
		for _, cancel := range c.calls {
			cancel()
		}
		c.mu.Unlock()
		c.cancel()
		c.conn.Close()
		if why != "" {
			c.s.log.Warn("client cut off", c.logAttrs("why", why)...)
		} else {
			c.s.log.Info("client gone", c.logAttrs()...)
		}
		go c.teardown()
	})
}

// teardown destroys each of a gone client's ids as the kernel's close path
// does (docs/ibcmd.md): a listener is closed (its backlog rejected), a
// request not yet answered rejected, a connection closed (an attempt
// rejected, an established one disconnected, TimeWait left to run), a
// SIDR request answered with a reject. A CONNECT or ACCEPT in progress
// ends with its context, which rejects the attempt. The connections' ids
// stay counted until their TimeWait ends.
func (c *client) teardown() {
	c.callsWG.Wait()
	c.mu.Lock()
	hs := make(map[uint64]*entry, len(c.handles))
	for h, e := range c.handles {
		hs[h] = e
	}
	c.mu.Unlock()
	ctx, cancel := detached()
	defer cancel()
	for h, e := range hs {
		switch e.kind {
		case kindListener:
			c.closeListener(h, e)
		case kindConn:
			c.mu.Lock()
			req, conn := e.req, e.conn
			if req != nil && !e.answered {
				e.answered = true
				e.req = nil
			} else {
				req = nil
			}
			c.mu.Unlock()
			if req != nil {
				if err := req.Reject(ctx, wire.RejectConsumerDefined, nil, nil); err == nil {
					continue
				}
			}
			if conn != nil {
				_ = conn.Close()
			}
		case kindSIDR:
			_ = e.sidr.Reply(ctx, &cm.SIDRReplyParams{Status: wire.SIDRReject})
			c.forget(h)
		}
	}
	c.s.clientGone(c)
}

// dispatch runs one call of the client's: HELLO, CANCEL and the calls
// that only read (inline) at once, every other on a goroutine of its own
// (a CONNECT may wait for minutes).
func (c *client) dispatch(fr hostproto.Frame) {
	switch fr.Op {
	case hostproto.OpHello:
		body, err := c.hello(fr.Body.(*hostproto.HelloReq))
		c.reply(fr, body, err)
		return
	case hostproto.OpCancel:
		c.mu.Lock()
		cancel := c.calls[fr.Body.(*hostproto.CancelReq).ReqID]
		c.mu.Unlock()
		if cancel != nil {
			cancel()
		}
		c.reply(fr, &hostproto.Empty{}, nil)
		return
	}
	if c.port == nil {
		c.reply(fr, nil, hostproto.ErrNotAttached)
		return
	}
	c.mu.Lock()
	if c.dead {
		// Cut off as the frame was read: the teardown waits for the calls
		// started before, and a call started now would act for a client
		// that is gone. Its reply would not be written.
		c.mu.Unlock()
		return
	}
	if _, dup := c.calls[fr.ReqID]; dup {
		c.mu.Unlock()
		c.reply(fr, nil, fmt.Errorf("%w: request ID %d is in use by a call in progress", hostproto.ErrBadField, fr.ReqID))
		return
	}
	if inline(fr.Op) {
		c.mu.Unlock()
		body, err := c.call(c.ctx, fr)
		c.reply(fr, body, err)
		hostproto.Release(body)
		return
	}
	if len(c.calls) >= c.s.cfg.Quota.Calls {
		c.mu.Unlock()
		c.reply(fr, nil, fmt.Errorf("%w: %d calls in progress", hostproto.ErrQuota, len(c.calls)))
		return
	}
	// Not a child of c.ctx: a burst of calls would queue on its lock to
	// join and leave its children; kill cancels each call instead.
	ctx, cancel := context.WithCancel(context.Background())
	c.calls[fr.ReqID] = cancel
	c.callsWG.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.callsWG.Done()
		body, err := c.call(ctx, fr)
		c.mu.Lock()
		delete(c.calls, fr.ReqID)
		c.mu.Unlock()
		cancel()
		c.reply(fr, body, err)
		// Encoded, and copied out of: a burst's calls share a few.
		hostproto.Release(fr.Body)
		hostproto.Release(body)
	}()
}

// inline reports whether a call of op runs on the reader's goroutine: one
// that reads under the Manager's lock and waits for nothing (CONN_INFO,
// STATS, PORT_INFO), which a goroutine would cost more than it does. A
// call that steps the Manager may not: its end waits until OnEvent has
// told the events before it, among them, maybe, a LAP_POLICY question
// that waits for this client's answer, which only this goroutine reads.
func inline(op hostproto.Op) bool {
	switch op {
	case hostproto.OpConnInfo, hostproto.OpStats, hostproto.OpPortInfo:
		return true
	}
	return false
}

// sidrInfoError is a ResolveSIDR refusal with the SIDR_REP it came in.
type sidrInfoError struct {
	err error
	rep [wire.MADSize]byte
}

func (e *sidrInfoError) Error() string { return e.err.Error() }
func (e *sidrInfoError) Unwrap() error { return e.err }

func (c *client) reply(fr hostproto.Frame, body hostproto.Body, err error) {
	lvl := slog.LevelDebug
	if fr.Op == hostproto.OpListen || fr.Op == hostproto.OpListenerClose || fr.Op == hostproto.OpHello || err != nil {
		lvl = slog.LevelInfo
	}
	if err != nil {
		b := hostproto.StatusOf(err)
		var si *sidrInfoError
		if errors.As(err, &si) {
			b.Info = si.rep[:]
		}
		c.s.log.Log(context.Background(), lvl, "call", c.logAttrs("op", fr.Op, "req", fr.ReqID, "status", b.Code, "err", err)...)
		c.push(fr.Op, b.Code, fr.ReqID, &b)
		return
	}
	if c.s.log.Enabled(context.Background(), lvl) {
		// The attributes are built only for a record that is kept:
		// most calls log at debug level, which a daemon seldom keeps.
		c.s.log.Log(context.Background(), lvl, "call", c.logAttrs("op", fr.Op, "req", fr.ReqID, "status", 0)...)
	}
	c.push(fr.Op, hostproto.StatusOK, fr.ReqID, body)
}

func (c *client) hello(b *hostproto.HelloReq) (hostproto.Body, error) {
	if c.port != nil {
		return nil, fmt.Errorf("%w: HELLO came already", hostproto.ErrNotAttached)
	}
	p := c.s.port(b.Port)
	if p == nil {
		return nil, fmt.Errorf("%w: %q (the daemon runs %s)", hostproto.ErrNoPort, b.Port, strings.Join(c.s.Ports(), ", "))
	}
	// Under qmu, where the writer reads it as it takes a batch: the
	// replies to calls made before HELLO may be being written.
	c.qmu.Lock()
	c.packed = b.Flags&hostproto.HelloPacked != 0
	c.qmu.Unlock()
	c.port = p
	c.lapPolicy = b.Flags&hostproto.HelloLAPPolicy != 0
	c.noSent = b.Flags&hostproto.HelloNoSentEvents != 0
	c.noEcho = b.Flags&hostproto.HelloNoEcho != 0
	maxTW := p.cfg.MaxTimeWait
	if maxTW == 0 {
		maxTW = defaultMaxTimeWait
	}
	c.s.log.Info("attached", c.logAttrs("port", p.name)...)
	return &hostproto.HelloReply{UID: c.cred.Uid, GID: c.cred.Gid, PID: uint32(c.cred.Pid),
		MaxEvents: uint32(c.s.cfg.Quota.Events), MinTimeWait: p.cfg.MinTimeWait, MaxTimeWait: maxTW,
		Port: p.body, Ports: c.s.Ports()}, nil
}

// newHandle names e for the client, within its user's id quota.
func (c *client) newHandle(e *entry) (uint64, error) {
	if err := c.s.takeID(c, e.kind == kindListener); err != nil {
		return 0, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextHandle++
	c.handles[c.nextHandle] = e
	return c.nextHandle, nil
}

// forget lets go of a handle once (a second call does nothing).
func (c *client) forget(h uint64) {
	c.mu.Lock()
	e := c.handles[h]
	delete(c.handles, h)
	var hasQPN bool
	if e != nil {
		e.letGo = true
		hasQPN = e.hasQPN
	}
	c.mu.Unlock()
	if e == nil {
		return
	}
	if e.release != nil {
		e.release()
	}
	if hasQPN {
		c.port.dropQPN(e)
	}
	c.s.dropID(c, e.kind == kindListener)
}

// connEnded is the end of a connection's handle: its TIMEWAIT_EXIT was
// told (or its TimeWaitExit closed without one, its Manager stopping).
func (c *client) connEnded(h uint64) {
	c.mu.Lock()
	e := c.handles[h]
	c.mu.Unlock()
	if e == nil || e.kind != kindConn {
		return
	}
	c.forget(h)
}

// lookup returns the client's entry of handle h, of kind k.
func (c *client) lookup(h uint64, k entryKind) (*entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.handles[h]
	if e == nil || e.kind != k {
		return nil, fmt.Errorf("%w: %d", hostproto.ErrNoHandle, h)
	}
	return e, nil
}

// daemonCall sends one of the daemon's requests and waits for the
// client's reply, at most wait, and not beyond the client's end.
func (c *client) daemonCall(op hostproto.Op, b hostproto.Body, wait time.Duration) (hostproto.Frame, error) {
	ch := make(chan hostproto.Frame, 1)
	c.mu.Lock()
	c.nextDReq++
	id := c.nextDReq
	c.dcalls[id] = ch
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.dcalls, id)
		c.mu.Unlock()
	}()
	if !c.push(op, 0, id, b) {
		return hostproto.Frame{}, errClientGone
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case fr := <-ch:
		return fr, nil
	case <-t.C:
		return hostproto.Frame{}, fmt.Errorf("no answer to %s in %v", op, wait)
	case <-c.ctx.Done():
		return hostproto.Frame{}, errClientGone
	}
}

// qpModify asks the client to move its QP. With wait, it returns the
// client's answer; without (the Manager's moves under its lock: ERR, an
// alternate path) it only queues the request.
func (c *client) qpModify(h uint64, qpn uint32, as []qpattr.Attr, wait bool) error {
	b := &hostproto.QPModifyReq{Handle: h, QPN: qpn, Wait: wait, Attrs: as}
	if !wait {
		c.mu.Lock()
		c.nextDReq++
		id := c.nextDReq
		c.mu.Unlock()
		c.push(hostproto.OpQPModify, 0, id, b)
		return nil
	}
	fr, err := c.daemonCall(hostproto.OpQPModify, b, c.s.cfg.QPModifyTimeout)
	if err != nil {
		return fmt.Errorf("%w: %w", hostproto.ErrQPModify, err)
	}
	if fr.Status != hostproto.StatusOK {
		eb, _ := fr.Body.(*hostproto.ErrorBody)
		msg := fr.Status.String()
		if eb != nil && eb.Message != "" {
			msg = eb.Message
		}
		return fmt.Errorf("%w: %s", hostproto.ErrQPModify, msg)
	}
	return nil
}

// askLAPPolicy asks the client's LAPPolicy; no answer in time accepts.
// The Manager tells its events in order, the policy's question among
// them, so the wait holds back every event of the port: a client that
// once lets it run out is not asked again, its LAPs accepted.
func (c *client) askLAPPolicy(h uint64, lap *wire.LAP) wire.APRStatus {
	if c.lapSilent.Load() {
		return wire.APRSuccess
	}
	fr, err := c.daemonCall(hostproto.OpLAPPolicy, &hostproto.LAPPolicyReq{Handle: h, LAP: *lap}, c.s.cfg.LAPPolicyWait)
	if err != nil && !errors.Is(err, errClientGone) {
		c.lapSilent.Store(true)
		c.s.log.Warn("LAP policy unanswered: its LAPs are accepted from now on", c.logAttrs("err", err)...)
	}
	if err != nil || fr.Status != hostproto.StatusOK {
		return wire.APRSuccess
	}
	return fr.Body.(*hostproto.LAPPolicyReply).Status
}

// proxyQP is the client's QP as the Manager drives it: each move is a
// QP_MODIFY to the client. Moves to INIT, RTR and RTS come together
// (ModifyAll, on the goroutine of the CONNECT or ACCEPT that waits for
// them) and wait for the client; single moves (ERR, an alternate path's
// load) come under the Manager's lock and must not wait.
type proxyQP struct {
	c   *client
	h   uint64
	qpn uint32
}

func (q *proxyQP) QPN() uint32 { return q.qpn }

func (q *proxyQP) Modify(a qpattr.Attr) error {
	return q.c.qpModify(q.h, q.qpn, []qpattr.Attr{a}, false)
}

func (q *proxyQP) ModifyAll(as []qpattr.Attr) error {
	return q.c.qpModify(q.h, q.qpn, as, true)
}
