package cm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/hostproto"
)

// link is a dialed Manager's socket to the daemon (remoteOps over
// hostproto's frames): calls write a request and wait for the reply with
// its request ID; the reader goroutine takes every frame the daemon sends,
// in order: replies, events (applied to the mirror), and the daemon's own
// requests (QP_MODIFY, LAP_POLICY), which it answers.
type link struct {
	conn *net.UnixConn
	m    *Manager
	// packed: the daemon takes and sends packets of several frames
	// (hostproto.HelloPacked); set before the reader starts.
	packed bool
	// rest: the frames that came after the HELLO's reply in its packet,
	// the reader's first.
	rest []byte

	wmu sync.Mutex
	// The frames to write: pend is the packet being filled, full the
	// packets filled before it; writing says a caller is writing them,
	// which takes the frames queued meanwhile too, so that calls made at
	// once go in a few packets. werr: a write failed, and every later one
	// fails with it. free holds the buffers of packets written, for the
	// next (packetCap each: a packet is filled without growing its
	// buffer); out, the writer's list of the packets it writes.
	pend    []byte
	full    [][]byte
	free    [][]byte
	out     [][]byte
	writing bool
	werr    error

	mu    sync.Mutex
	next  uint64
	calls map[uint64]*linkCall
	// idle holds calls done with, their reply channels empty, for this
	// link's next calls: a burst of calls allocates none after the first.
	idle  []*linkCall
	dead  error         // why the link ended: every call fails with it
	ended chan struct{} // closed once the reader has stopped
}

// linkCall is a call under way: where its reply goes, and its QP, which
// the daemon's QP_MODIFY may name before the client knows its handle.
type linkCall struct {
	reply chan hostproto.Frame
	qp    QP
	req   *wire.REQ // a Connect's REQ, for its mirror
	qpErr error     // the QP refused a move the daemon asked for
}

// hand gives the call its reply; a second one (the link's end after the
// reply) is dropped. Under the link's mu, so that a call forgotten is
// handed nothing: its linkCall serves the next call.
func (c *linkCall) hand(f hostproto.Frame) {
	select {
	case c.reply <- f:
	default:
	}
}

// linkCancelWait bounds how long a call given up by its context waits for
// the daemon to confirm: the daemon answers a CANCEL at once.
const linkCancelWait = time.Second

func newLink(conn *net.UnixConn) *link {
	return &link{conn: conn, calls: map[uint64]*linkCall{}, ended: make(chan struct{})}
}

// write sends one frame: at once, or, when another call is writing, in
// the packet it writes next (packed). A frame queued behind another
// call's write returns before it is written: if that write fails, the
// socket is closed, and the reader's end fails every call waiting for a
// reply.
func (l *link) write(op hostproto.Op, status hostproto.Status, id uint64, b hostproto.Body) error {
	l.wmu.Lock()
	if l.werr != nil {
		defer l.wmu.Unlock()
		return l.werr
	}
	if l.pend == nil && l.packed {
		l.pend = l.buffer()
	}
	start := len(l.pend)
	buf, err := hostproto.AppendFrame(l.pend, op, status, id, b)
	if err != nil {
		l.wmu.Unlock()
		return fmt.Errorf("%w: %w", ErrBadParam, err)
	}
	switch {
	case !l.packed:
		l.full, l.pend = append(l.full, buf), nil // a packet of its own
	case len(buf) > hostproto.MaxFrame && start > 0:
		// The frame starts the next packet.
		l.full = append(l.full, buf[:start])
		l.pend = append(l.buffer(), buf[start:]...)
	default:
		l.pend = buf
	}
	if l.writing {
		l.wmu.Unlock()
		return nil
	}
	l.writing = true
	if l.packed {
		// The calls made at once are running to queue their frames:
		// they go first, so that the packet takes theirs too.
		l.wmu.Unlock()
		runtime.Gosched()
		l.wmu.Lock()
	}
	err = l.flush()
	l.writing = false
	l.wmu.Unlock()
	return err
}

// packetCap is the capacity of a packet's buffer: a packet holds at most
// MaxFrame bytes, and the frame that goes past it, before it is moved to
// the next packet, fits in the rest unless it is over a kilobyte.
const packetCap = hostproto.MaxFrame + 1024

// maxFreePackets bounds the buffers a link keeps.
const maxFreePackets = 2

// buffer is an empty packet buffer; under wmu.
func (l *link) buffer() []byte {
	if n := len(l.free); n > 0 {
		b := l.free[n-1]
		l.free = l.free[:n-1]
		return b
	}
	return packetPool.Get().(*packetBuf).b[:0]
}

// packetBuf is a packet's buffer in packetPool: a pointer, so that
// putting it back allocates nothing.
type packetBuf struct{ b []byte }

// packetPool holds the packet buffers beyond a link's maxFreePackets,
// for any link: a dialed Manager's first bursts need several.
var packetPool = sync.Pool{New: func() any { return &packetBuf{b: make([]byte, 0, packetCap)} }}

// flush writes the packets queued, and those queued as it writes, in
// order; with wmu held, which it lets go of around each write.
func (l *link) flush() error {
	for len(l.full) > 0 || len(l.pend) > 0 {
		out := append(l.out[:0], l.full...)
		if len(l.pend) > 0 {
			out = append(out, l.pend)
		}
		l.full, l.pend = l.full[:0], nil
		l.wmu.Unlock()
		var err error
		for _, p := range out {
			if err == nil {
				_, err = l.conn.Write(p)
			}
		}
		l.wmu.Lock()
		for i, p := range out {
			switch {
			case cap(p) != packetCap:
			case len(l.free) < maxFreePackets:
				l.free = append(l.free, p[:0])
			default:
				packetPool.Put(&packetBuf{b: p[:0]})
			}
			out[i] = nil
		}
		l.out = out[:0]
		if err != nil {
			l.werr = fmt.Errorf("%w: writing to the daemon: %w", ErrClosed, err)
			l.full, l.pend = nil, nil
			_ = l.conn.Close()
			return l.werr
		}
	}
	return nil
}

// start registers a call and returns its request ID.
func (l *link) start(rc *remoteCall) (uint64, *linkCall, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead != nil {
		return 0, nil, l.dead
	}
	l.next++
	var c *linkCall
	if n := len(l.idle); n > 0 {
		c = l.idle[n-1]
		l.idle = l.idle[:n-1]
	} else {
		c = &linkCall{reply: make(chan hostproto.Frame, 1)}
	}
	if rc != nil {
		c.qp, c.req = rc.qp, rc.req
	}
	l.calls[l.next] = c
	return l.next, c, nil
}

// maxIdleCalls bounds the calls a link keeps for reuse: a burst's worth
// (a cmtime run of 1,000 connections makes a call per connection at once),
// so that the burst that follows allocates none; about 200 bytes each.
const maxIdleCalls = 1024

// forget lets go of the call id: nothing is handed to c from now on, and
// it serves a later call.
func (l *link) forget(id uint64, c *linkCall) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.calls, id)
	if len(l.idle) >= maxIdleCalls {
		return
	}
	select {
	case <-c.reply: // a reply not taken: the call gave up on it
	default:
	}
	*c = linkCall{reply: c.reply}
	l.idle = append(l.idle, c)
}

// call sends a request and waits for its reply: the reply's body, or the
// error its status stands for. When ctx ends first the daemon is told to
// give the call up (CANCEL), and call returns ctx's error once it has.
// The request b is given back to its pool once written (hostproto.Release):
// the caller uses it no more.
func (l *link) call(ctx context.Context, op hostproto.Op, b hostproto.Body, rc *remoteCall) (hostproto.Body, error) {
	id, c, err := l.start(rc)
	if err != nil {
		return nil, err
	}
	defer l.forget(id, c)
	err = l.write(op, hostproto.StatusOK, id, b)
	hostproto.Release(b) // encoded: a burst's calls share a few
	if err != nil {
		return nil, err
	}
	var f hostproto.Frame
	select {
	case f = <-c.reply:
	case <-ctx.Done():
		if cid, cc, err := l.start(nil); err == nil {
			_ = l.write(hostproto.OpCancel, hostproto.StatusOK, cid, &hostproto.CancelReq{ReqID: id})
			l.forget(cid, cc)
		}
		t := time.NewTimer(linkCancelWait)
		defer t.Stop()
		select {
		case f = <-c.reply:
		case <-t.C:
		}
		if f.Body == nil || f.Status != hostproto.StatusOK {
			return nil, ctx.Err()
		}
	}
	if f.Body == nil {
		return nil, l.deadErr()
	}
	if f.Status != hostproto.StatusOK {
		eb, _ := f.Body.(*hostproto.ErrorBody)
		if eb == nil {
			return nil, fmt.Errorf("%w: status %s without an error body", hostproto.ErrBadField, f.Status)
		}
		if f.Status == hostproto.StatusQPModify {
			l.mu.Lock()
			qpErr := c.qpErr
			l.mu.Unlock()
			if qpErr != nil {
				return nil, qpErr // the QP's own error, as from the embedded Manager
			}
		}
		return nil, hostError(eb)
	}
	return f.Body, nil
}

func (l *link) deadErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.dead != nil {
		return l.dead
	}
	return ErrClosed
}

// close ends the session (the daemon sees EOF and tears down the client's
// ids) and waits for the reader to stop.
func (l *link) close() error {
	err := l.conn.Close()
	<-l.ended
	return err
}

// readPacket reads one packet from the daemon.
func (l *link) readPacket(buf []byte) ([]byte, error) {
	n, err := l.conn.Read(buf)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, errors.New("EOF")
	}
	return buf[:n], nil
}

// dispatchAll hands each frame of a packet to whoever it is for, and
// stops at the first that does not decode.
func (l *link) dispatchAll(p []byte) error {
	if !l.packed {
		f, err := hostproto.DecodeFromDaemon(p)
		if err == nil {
			l.dispatch(&f)
		}
		return err
	}
	for len(p) > 0 {
		var frame []byte
		frame, p = hostproto.NextFrame(p)
		f, err := hostproto.DecodeFromDaemon(frame)
		if err != nil {
			return err
		}
		l.dispatch(&f)
	}
	return nil
}

// reader is the link's goroutine: it hands each frame of the daemon to
// whoever it is for, until the socket ends or a frame does not decode
// (the daemon is not one this client can follow).
func (l *link) reader() {
	defer close(l.ended)
	buf := make([]byte, hostproto.MaxFrame+1)
	cause := l.dispatchAll(l.rest)
	l.rest = nil
	for cause == nil {
		var p []byte
		if p, cause = l.readPacket(buf); cause == nil {
			cause = l.dispatchAll(p)
		}
	}
	err := fmt.Errorf("%w: the daemon's connection ended: %w", ErrClosed, cause)
	l.mu.Lock()
	l.dead = err
	for _, c := range l.calls {
		c.hand(hostproto.Frame{}) // no body: the link is dead
	}
	l.calls = map[uint64]*linkCall{}
	l.mu.Unlock()
	l.m.apply(&remoteEvent{kind: remoteStopped, err: err})
}

// dispatch hands one frame to whoever it is for.
func (l *link) dispatch(f *hostproto.Frame) {
	switch f.Op {
	case hostproto.OpQPModify:
		l.qpModify(f)
	case hostproto.OpLAPPolicy:
		l.lapPolicy(f)
	case hostproto.OpEvent, hostproto.OpRequestEvent, hostproto.OpSIDRRequestEvent, hostproto.OpPortDown:
		l.event(f)
	default:
		l.mu.Lock()
		if c := l.calls[f.ReqID]; c != nil {
			c.hand(*f)
		}
		l.mu.Unlock()
	}
}
