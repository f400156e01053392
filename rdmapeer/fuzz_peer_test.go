package rdmapeer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/hw/verbs"
	"github.com/ibcm/ibcm/internal/memqp"
	"github.com/ibcm/ibcm/rdmapeer"
)

// FuzzPeerMessages has a hostile peer send what the fuzzer says to a
// ucmatose client (messages of any length, count and content) or a udaddy
// server (datagrams of any length and immediate data, from the client's QP
// or a stranger's), each session expecting 3 messages of 16 bytes. Nothing
// panics, the session ends within its data timeout, and it is verified
// when exactly its 3 messages came, and never with fewer than 3 received.
func FuzzPeerMessages(f *testing.F) {
	f.Add([]byte{0, 16, 0, 16, 0, 16, 0})
	f.Add([]byte{1, 16, 0, 16, 0, 16, 0})
	f.Add([]byte{1, 16, 2, 16, 0, 0, 1, 16, 0})
	f.Add([]byte{0, 15, 0, 17, 0})
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) == 0 || len(script) > 64 {
			return
		}
		fab := memqp.NewFabric()
		o := rdmapeer.Options{Count: 3, Size: 16, Timeout: 30 * time.Millisecond}
		ud := script[0]&1 == 1
		name, role := "ucmatose", rdmapeer.Client
		if ud {
			name, role = "udaddy", rdmapeer.Server
		}
		s := open(t, fab, name, role, o)
		a, b := newHostile(t, fab, ud), newHostile(t, fab, ud)
		if ud {
			require.NoError(t, s.UDReady())
			a.udReady()
			b.udReady()
		} else {
			connect(t, s.QP(), a.qp)
			for i := range 3 {
				require.NoError(t, a.qp.PostRecv(uint64(i), 1024+i*16, 16))
			}
		}
		sent, good := 0, 0
		for i := 1; i+1 < len(script) && sent < 32; i += 2 {
			n, flags := int(script[i]), script[i+1]
			from := a
			w := rdmapeer.WR{ID: uint64(sent), Op: verbs.OpSend, N: n}
			if ud {
				if flags&1 != 0 {
					from = b
				}
				w.Op, w.Imm = verbs.OpSendWithImm, from.qp.QPN()
				if flags&2 != 0 {
					w.Imm ^= 0x10
				}
				w.Dest = &rdmapeer.UDDest{QPN: s.QP().QPN(), QKey: rdmapeer.UDPQKey}
			}
			if from.qp.PostSend(w) != nil {
				break
			}
			sent++
			if n == 16 && (!ud || flags&3 == 0) {
				good++
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err := from.qp.Next(ctx) // its slot
			cancel()
			require.NoError(t, err)
		}
		start := time.Now()
		var err error
		require.NotPanics(t, func() {
			if ud {
				err = s.UDServer(context.Background())
			} else {
				_, err = s.Run(context.Background())
			}
		})
		require.Less(t, time.Since(start), time.Second, "the data timeout is 30 ms")
		st := s.Finish(err)
		if sent == 3 && good == 3 {
			require.True(t, st.Verified, "%+v: %v", st, err)
		}
		if st.Verified {
			require.NoError(t, err)
			require.Equal(t, 3, st.Recv)
			require.Empty(t, st.Problem)
		}
	})
}
