package cm

import (
	"context"
	"errors"
	"fmt"
	"net"
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
	wmu  sync.Mutex // one frame written at a time
	wbuf []byte

	mu    sync.Mutex
	next  uint64
	calls map[uint64]*linkCall
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
// reply) is dropped.
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

// write sends one frame.
func (l *link) write(op hostproto.Op, status hostproto.Status, id uint64, b hostproto.Body) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	buf, err := hostproto.AppendFrame(l.wbuf[:0], op, status, id, b)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrBadParam, err)
	}
	l.wbuf = buf
	if _, err := l.conn.Write(buf); err != nil {
		return fmt.Errorf("%w: writing to the daemon: %w", ErrClosed, err)
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
	c := &linkCall{reply: make(chan hostproto.Frame, 1)}
	if rc != nil {
		c.qp, c.req = rc.qp, rc.req
	}
	l.calls[l.next] = c
	return l.next, c, nil
}

func (l *link) forget(id uint64) {
	l.mu.Lock()
	delete(l.calls, id)
	l.mu.Unlock()
}

// call sends a request and waits for its reply: the reply's body, or the
// error its status stands for. When ctx ends first the daemon is told to
// give the call up (CANCEL), and call returns ctx's error once it has.
func (l *link) call(ctx context.Context, op hostproto.Op, b hostproto.Body, rc *remoteCall) (hostproto.Body, error) {
	id, c, err := l.start(rc)
	if err != nil {
		return nil, err
	}
	defer l.forget(id)
	if err := l.write(op, hostproto.StatusOK, id, b); err != nil {
		return nil, err
	}
	var f hostproto.Frame
	select {
	case f = <-c.reply:
	case <-ctx.Done():
		if cid, _, err := l.start(nil); err == nil {
			_ = l.write(hostproto.OpCancel, hostproto.StatusOK, cid, &hostproto.CancelReq{ReqID: id})
			l.forget(cid)
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

// read reads one frame from the daemon.
func (l *link) read(buf []byte) (hostproto.Frame, error) {
	n, err := l.conn.Read(buf)
	if err != nil {
		return hostproto.Frame{}, err
	}
	if n == 0 {
		return hostproto.Frame{}, errors.New("EOF")
	}
	return hostproto.DecodeFromDaemon(buf[:n])
}

// reader is the link's goroutine: it hands each frame of the daemon to
// whoever it is for, until the socket ends or a frame does not decode
// (the daemon is not one this client can follow).
func (l *link) reader() {
	defer close(l.ended)
	buf := make([]byte, hostproto.MaxFrame+1)
	var cause error
	for {
		f, err := l.read(buf)
		if err != nil {
			cause = err
			break
		}
		l.dispatch(&f)
	}
	err := fmt.Errorf("%w: the daemon's connection ended: %w", ErrClosed, cause)
	l.mu.Lock()
	l.dead = err
	calls := l.calls
	l.calls = map[uint64]*linkCall{}
	l.mu.Unlock()
	for _, c := range calls {
		c.hand(hostproto.Frame{}) // no body: the link is dead
	}
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
		c := l.calls[f.ReqID]
		l.mu.Unlock()
		if c != nil {
			c.hand(*f)
		}
	}
}
