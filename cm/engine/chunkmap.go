package engine

// chunkMap finds the chunks of an idTable or ridIndex by key (the high bits
// of an ID) through a map, remembering the last chunk found: lookups come
// in runs of nearby IDs, and those skip the map. Emptied chunks are kept
// for reuse (at most maxSpareChunks).
type chunkMap[C any] struct {
	m       map[uint32]*C
	last    *C // the chunk of lastKey
	lastKey uint32
	spare   []*C // empty chunks kept for reuse
}

// maxSpareChunks bounds the empty chunks a chunkMap keeps for reuse, so
// that a burst of connections opened and closed together does not
// allocate: 64 chunks, 18 KiB.
const maxSpareChunks = 64

func newChunkMap[C any]() chunkMap[C] { return chunkMap[C]{m: map[uint32]*C{}} }

// get returns the chunk of key k, or nil.
func (t *chunkMap[C]) get(k uint32) *C {
	if t.last != nil && t.lastKey == k {
		return t.last
	}
	ch := t.m[k]
	if ch != nil {
		t.last, t.lastKey = ch, k
	}
	return ch
}

// make returns the chunk of key k, adding an empty one (a spare if there
// is one) when k has none.
func (t *chunkMap[C]) make(k uint32) *C {
	ch := t.get(k)
	if ch == nil {
		if n := len(t.spare); n > 0 {
			ch = t.spare[n-1]
			t.spare = t.spare[:n-1]
		} else {
			ch = new(C)
		}
		t.m[k] = ch
		t.last, t.lastKey = ch, k
	}
	return ch
}

// free takes out ch, the chunk of key k, which is empty now.
func (t *chunkMap[C]) free(k uint32, ch *C) {
	delete(t.m, k)
	if t.last == ch {
		t.last = nil
	}
	if len(t.spare) < maxSpareChunks {
		t.spare = append(t.spare, ch)
	}
}
