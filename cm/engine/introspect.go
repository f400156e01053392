package engine

import (
	"iter"

	"github.com/ibcm/ibcm/cm/transport"
)

// IDInfo is a read-only view of one id, for tests, property checks and
// tools.
type IDInfo struct {
	ID         CommID
	State      State
	LAP        LAPState
	Active     bool // this side sent the REQ
	LocalQPN   uint32
	RemoteGUID uint64
	RemoteID   CommID
	RemoteQPN  uint32
	ServiceID  uint64
	Mask       uint64 // listens
	Listen     CommID // passive ids: the listen that took the REQ
	Timer      bool   // a timer runs
	Deadline   Time   // when Timer
	Retries    uint8  // retries left for the outstanding message
	MaxRetries uint8  // Max CM Retries of the id's exchanges (capped by Config.MaxRetries)
	Addr       transport.Addr
	// AltPath: an alternate path is loaded (the REQ carried one, or a LAP
	// exchange whose APR accepted it ended).
	AltPath bool
}

func (c *conn) info() IDInfo {
	return IDInfo{ID: c.id, State: c.state, LAP: c.lap, Active: c.flags&flagActive != 0,
		LocalQPN: c.qpn, RemoteGUID: c.rguid, RemoteID: c.rid, RemoteQPN: c.rqpn,
		ServiceID: c.sid, Mask: c.mask, Listen: c.listen, Timer: c.heapIdx != timerNone, Deadline: c.deadline,
		Retries: c.retries, MaxRetries: c.maxRetry, Addr: c.addr, AltPath: c.flags&flagAlt != 0}
}

// NumIDs returns the number of ids holding a local comm ID.
func (e *Engine) NumIDs() int { return e.ids.len() }

// Info returns the view of one id.
func (e *Engine) Info(id CommID) (IDInfo, bool) {
	if c := e.ids.get(id); c != nil {
		return c.info(), true
	}
	return IDInfo{}, false
}

// State returns an id's state; IDLE for an unknown id.
func (e *Engine) State(id CommID) State {
	if c := e.ids.get(id); c != nil {
		return c.state
	}
	return StateIdle
}

// IDs iterates over every id in creation order.
func (e *Engine) IDs() iter.Seq[IDInfo] {
	return func(yield func(IDInfo) bool) {
		for c := e.head; c != nil; {
			next := c.next
			if !yield(c.info()) {
				return
			}
			c = next
		}
	}
}

// RemoteIDTable iterates over the remote-ID table: (remote comm ID, remote
// CA GUID) → local id.
func (e *Engine) RemoteIDTable() iter.Seq2[RemoteIDKey, CommID] {
	return func(yield func(RemoteIDKey, CommID) bool) {
		e.rids.eachID(func(k RemoteIDKey, c *conn) bool { return yield(k, c.id) })
	}
}

// RemoteQPNTable iterates over the remote-QPN table: (remote QPN, remote CA
// GUID) → local id. Only connected ids are in it (and, with
// LegacyTimeWaitQPN, ids in TimeWait).
func (e *Engine) RemoteQPNTable() iter.Seq2[RemoteQPNKey, CommID] {
	return func(yield func(RemoteQPNKey, CommID) bool) {
		for k, c := range e.remoteQPN {
			if !yield(k, c.id) {
				return
			}
		}
	}
}

// ListenTable iterates over the listen table, most specific first.
func (e *Engine) ListenTable() iter.Seq2[ListenKey, CommID] {
	return func(yield func(ListenKey, CommID) bool) {
		for _, g := range e.listens.groups {
			for _, c := range g.m {
				if !yield(ListenKey{ServiceID: c.sid, Mask: c.mask}, c.id) {
					return
				}
			}
		}
	}
}

// SIDRTable iterates over the SIDR table: (request ID, requester port) →
// local id.
func (e *Engine) SIDRTable() iter.Seq2[SIDRKey, CommID] {
	return func(yield func(SIDRKey, CommID) bool) {
		for k, c := range e.sidr {
			if !yield(k, c.id) {
				return
			}
		}
	}
}

// TimeWaitList iterates over the ids in TimeWait, oldest first.
func (e *Engine) TimeWaitList() iter.Seq[CommID] {
	return func(yield func(CommID) bool) {
		// Each lane is in entry order: merge them by entry number.
		var cur [32]*conn
		for k := range e.lanes {
			cur[k] = e.lanes[k].head
		}
		for {
			best := -1
			for k, c := range cur {
				if c != nil && (best < 0 || c.twEntry() < cur[best].twEntry()) {
					best = k
				}
			}
			if best < 0 {
				return
			}
			c := cur[best]
			cur[best] = c.twNext
			if !yield(c.id) {
				return
			}
		}
	}
}

// TimeWaitLen returns the length of the TimeWait list.
func (e *Engine) TimeWaitLen() int { return e.twLen }

// HalfOpen returns the number of passive ids not yet established.
func (e *Engine) HalfOpen() int { return e.halfOpen }
