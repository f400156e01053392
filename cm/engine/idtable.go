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
	chunks chunkMap[idChunk]
	n      int
}

const (
	idChunkBits = 5
	idChunkSize = 1 << idChunkBits
	idChunkMask = idChunkSize - 1
)

type idChunk struct {
	n    int32
	slot [idChunkSize]*conn
}

func newIDTable() idTable { return idTable{chunks: newChunkMap[idChunk]()} }

func (t *idTable) get(id CommID) *conn {
	if ch := t.chunks.get(uint32(id) >> idChunkBits); ch != nil {
		return ch.slot[id&idChunkMask]
	}
	return nil
}

func (t *idTable) put(id CommID, c *conn) {
	ch := t.chunks.make(uint32(id) >> idChunkBits)
	s := &ch.slot[id&idChunkMask]
	if *s == nil {
		ch.n++
		t.n++
	}
	*s = c
}

func (t *idTable) del(id CommID) {
	k := uint32(id) >> idChunkBits
	ch := t.chunks.get(k)
	if ch == nil || ch.slot[id&idChunkMask] == nil {
		return
	}
	ch.slot[id&idChunkMask] = nil
	ch.n--
	t.n--
	if ch.n == 0 {
		t.chunks.free(k, ch)
	}
}

func (t *idTable) len() int { return t.n }
