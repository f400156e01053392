package engine

// ridIndex holds the remote-ID table, (remote comm ID, remote CA GUID) →
// id, and its twin by peer port, (remote comm ID, LID, GID) → id, which
// finds the target of a REJ that carries no GUID. Both are keyed by the
// remote comm ID first: a peer's comm IDs are consecutive, or nearly (a
// cyclic allocator, XORed with a constant by Linux), so the index keeps
// one primary slot per remote comm ID in chunks of ridChunkSize
// consecutive IDs, found through a map, and connections made one after
// the other share cache lines. A primary slot holds the entry whose remote
// comm ID it is; another peer's entry with the same remote comm ID (two
// entries differing only in GUID or port) goes to an overflow map keyed by
// the whole key. A key is in at most one place, so the index behaves
// exactly like the two maps it replaces: an insert replaces the key's
// entry, a removal takes out the key only when the remover owns it.
type ridIndex struct {
	chunks chunkMap[ridChunk]

	byID       map[RemoteIDKey]*conn // overflow of the remote-ID table
	byAddr     map[addrKey]*conn     // overflow of the by-port table
	nID, nAddr int                   // entries, overflow included
}

const (
	ridChunkBits = 4
	ridChunkSize = 1 << ridChunkBits
	ridChunkMask = ridChunkSize - 1
)

type ridSlot struct{ id, addr *conn }

type ridChunk struct {
	n    int32 // non-nil fields in slot
	slot [ridChunkSize]ridSlot
}

func newRIDIndex() ridIndex {
	return ridIndex{chunks: newChunkMap[ridChunk](), byID: map[RemoteIDKey]*conn{}, byAddr: map[addrKey]*conn{}}
}

// slot returns the primary slot of rid, or nil when its chunk is absent.
func (x *ridIndex) slot(rid CommID) *ridSlot {
	if ch := x.chunks.get(uint32(rid) >> ridChunkBits); ch != nil {
		return &ch.slot[rid&ridChunkMask]
	}
	return nil
}

// slotMake returns the primary slot of rid and its chunk, making the chunk.
func (x *ridIndex) slotMake(rid CommID) (*ridSlot, *ridChunk) {
	ch := x.chunks.make(uint32(rid) >> ridChunkBits)
	return &ch.slot[rid&ridChunkMask], ch
}

// release frees the chunk of rid if it is now empty.
func (x *ridIndex) release(rid CommID, ch *ridChunk) {
	ch.n--
	if ch.n > 0 {
		return
	}
	x.chunks.free(uint32(rid)>>ridChunkBits, ch)
}

func (x *ridIndex) getID(rid CommID, guid uint64) *conn {
	if s := x.slot(rid); s != nil && s.id != nil && s.id.rguid == guid {
		return s.id
	}
	if len(x.byID) > 0 {
		return x.byID[RemoteIDKey{rid, guid}]
	}
	return nil
}

func (x *ridIndex) getAddr(k addrKey) *conn {
	if s := x.slot(k.rid); s != nil && s.addr != nil && peerKey(k.rid, &s.addr.addr) == k {
		return s.addr
	}
	if len(x.byAddr) > 0 {
		return x.byAddr[k]
	}
	return nil
}

// put enters c under its (rid, GUID) and (rid, port) keys.
func (x *ridIndex) put(c *conn) {
	s, ch := x.slotMake(c.rid)
	switch k := (RemoteIDKey{c.rid, c.rguid}); {
	case s.id != nil && s.id.rguid == c.rguid:
		s.id = c
	case s.id == nil:
		if len(x.byID) > 0 && x.byID[k] != nil {
			delete(x.byID, k)
			x.nID--
		}
		s.id = c
		ch.n++
		x.nID++
	default:
		if x.byID[k] == nil {
			x.nID++
		}
		x.byID[k] = c
	}
	switch k := peerKey(c.rid, &c.addr); {
	case s.addr != nil && peerKey(c.rid, &s.addr.addr) == k:
		s.addr = c
	case s.addr == nil:
		if len(x.byAddr) > 0 && x.byAddr[k] != nil {
			delete(x.byAddr, k)
			x.nAddr--
		}
		s.addr = c
		ch.n++
		x.nAddr++
	default:
		if x.byAddr[k] == nil {
			x.nAddr++
		}
		x.byAddr[k] = c
	}
}

// remove takes c's keys out where c owns them.
func (x *ridIndex) remove(c *conn) {
	ch := x.chunks.get(uint32(c.rid) >> ridChunkBits)
	var s *ridSlot
	if ch != nil {
		s = &ch.slot[c.rid&ridChunkMask]
	}
	if s != nil && s.id == c {
		s.id = nil
		x.nID--
		x.release(c.rid, ch)
	} else if k := (RemoteIDKey{c.rid, c.rguid}); len(x.byID) > 0 && x.byID[k] == c {
		delete(x.byID, k)
		x.nID--
	}
	if s != nil && s.addr == c {
		s.addr = nil
		x.nAddr--
		x.release(c.rid, ch)
	} else if k := peerKey(c.rid, &c.addr); len(x.byAddr) > 0 && x.byAddr[k] == c {
		delete(x.byAddr, k)
		x.nAddr--
	}
}

// eachID calls f for every remote-ID entry until f returns false.
func (x *ridIndex) eachID(f func(RemoteIDKey, *conn) bool) {
	for _, ch := range x.chunks.m {
		for i := range ch.slot {
			if c := ch.slot[i].id; c != nil && !f(RemoteIDKey{c.rid, c.rguid}, c) {
				return
			}
		}
	}
	for k, c := range x.byID {
		if !f(k, c) {
			return
		}
	}
}
