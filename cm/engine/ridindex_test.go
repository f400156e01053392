package engine

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
)

// ridIndex behaves exactly like the two maps it replaced, remote ID →
// id and peer port → id, with insert-replaces and remove-by-owner: random
// operations over a small key space, so that keys share remote comm IDs,
// chunks and overflow entries.
func TestRIDIndexMatchesMaps(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		x := newRIDIndex()
		byID := map[RemoteIDKey]*conn{}
		byAddr := map[addrKey]*conn{}
		var in []*conn // conns inserted and not removed
		newConn := func() *conn {
			c := &conn{rid: CommID(rng.IntN(40)), rguid: uint64(rng.IntN(3)),
				addr: transport.Addr{LID: uint16(rng.IntN(3)), GRH: rng.IntN(2) == 0}}
			c.addr.GID[15] = byte(rng.IntN(2))
			return c
		}
		for step := range 2500 {
			if len(in) == 0 || rng.IntN(2) == 0 {
				c := newConn()
				x.put(c)
				byID[RemoteIDKey{c.rid, c.rguid}] = c
				byAddr[peerKey(c.rid, &c.addr)] = c
				in = append(in, c)
			} else {
				i := rng.IntN(len(in))
				c := in[i]
				in = append(in[:i], in[i+1:]...)
				x.remove(c)
				if k := (RemoteIDKey{c.rid, c.rguid}); byID[k] == c {
					delete(byID, k)
				}
				if k := peerKey(c.rid, &c.addr); byAddr[k] == c {
					delete(byAddr, k)
				}
			}
			if x.nID != len(byID) || x.nAddr != len(byAddr) {
				t.Fatalf("seed %d step %d: counts %d/%d, want %d/%d", seed, step, x.nID, x.nAddr, len(byID), len(byAddr))
			}
			for rid := CommID(0); rid < 40; rid++ {
				for g := uint64(0); g < 3; g++ {
					if got, want := x.getID(rid, g), byID[RemoteIDKey{rid, g}]; got != want {
						t.Fatalf("seed %d step %d: getID(%d, %d) = %p, want %p", seed, step, rid, g, got, want)
					}
				}
				for lid := uint16(0); lid < 3; lid++ {
					for _, grh := range []bool{false, true} {
						for gid := byte(0); gid < 2; gid++ {
							a := transport.Addr{LID: lid, GRH: grh}
							a.GID[15] = gid
							k := peerKey(rid, &a)
							if got, want := x.getAddr(k), byAddr[k]; got != want {
								t.Fatalf("seed %d step %d: getAddr(%v) = %p, want %p", seed, step, k, got, want)
							}
						}
					}
				}
			}
			seen := map[RemoteIDKey]*conn{}
			x.eachID(func(k RemoteIDKey, c *conn) bool { seen[k] = c; return true })
			if len(seen) != len(byID) {
				t.Fatalf("seed %d step %d: eachID saw %d entries, want %d", seed, step, len(seen), len(byID))
			}
			for k, c := range byID {
				if seen[k] != c {
					t.Fatalf("seed %d step %d: eachID: %v -> %p, want %p", seed, step, k, seen[k], c)
				}
			}
		}
		for _, c := range in {
			x.remove(c)
		}
		require.Zero(t, x.nID)
		require.Zero(t, x.nAddr)
		require.Empty(t, x.chunks.m, "empty chunks are freed")
		require.Empty(t, x.byID)
		require.Empty(t, x.byAddr)
	}
}
