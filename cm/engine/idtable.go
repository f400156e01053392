package engine

// idTable maps the local comm IDs held to their ids. The cyclic allocator
// hands out consecutive IDs, so the table keeps them in chunks of
// idChunkSize consecutive IDs found through a map keyed by ID /
// idChunkSize: an allocation probes the chunk the previous one used, and
// ids that were allocated together (and so enter and leave TimeWait
// together) share cache lines, where a hash table would scatter them over
// memory that a million ids make cold. A dense table costs about 9 bytes
// an ID; the worst case (one ID held per chunk) is one chunk, 288 bytes,
// an ID.
type idTable struct {
	chunks  map[uint32]*idChunk
	n       int
	last    *idChunk // the chunk of lastKey, to skip the map
	lastKey uint32
	spare   []*idChunk // empty chunks kept for reuse (at most maxSpareChunks)
}

// maxSpareChunks bounds the empty chunks an idTable or ridIndex keeps for
// reuse, so that a burst of connections opened and closed together does
// not allocate: 64 chunks, 18 KiB.
const maxSpareChunks = 64

const (
	idChunkBits = 5
	idChunkSize = 1 << idChunkBits
	idChunkMask = idChunkSize - 1
)

type idChunk struct {
	n    int32
	slot [idChunkSize]*conn
}

func newIDTable() idTable { return idTable{chunks: map[uint32]*idChunk{}} }

// chunk returns the chunk of key k, or nil.
func (t *idTable) chunk(k uint32) *idChunk {
	if t.last != nil && t.lastKey == k {
		return t.last
	}
	ch := t.chunks[k]
	if ch != nil {
		t.last, t.lastKey = ch, k
	}
	return ch
}

func (t *idTable) get(id CommID) *conn {
	if ch := t.chunk(uint32(id) >> idChunkBits); ch != nil {
		return ch.slot[id&idChunkMask]
	}
	return nil
}

func (t *idTable) put(id CommID, c *conn) {
	k := uint32(id) >> idChunkBits
	ch := t.chunk(k)
	if ch == nil {
		if n := len(t.spare); n > 0 {
			ch = t.spare[n-1]
			t.spare = t.spare[:n-1]
		} else {
			ch = new(idChunk)
		}
		t.chunks[k] = ch
		t.last, t.lastKey = ch, k
	}
	s := &ch.slot[id&idChunkMask]
	if *s == nil {
		ch.n++
		t.n++
	}
	*s = c
}

func (t *idTable) del(id CommID) {
	k := uint32(id) >> idChunkBits
	ch := t.chunk(k)
	if ch == nil || ch.slot[id&idChunkMask] == nil {
		return
	}
	ch.slot[id&idChunkMask] = nil
	ch.n--
	t.n--
	if ch.n == 0 {
		delete(t.chunks, k)
		if t.last == ch {
			t.last = nil
		}
		if len(t.spare) < maxSpareChunks {
			t.spare = append(t.spare, ch)
		}
	}
}

func (t *idTable) len() int { return t.n }
