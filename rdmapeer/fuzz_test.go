package rdmapeer

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

// FuzzDecoders feeds what a peer controls to the decoders of the wire:
// rping's info message, a UD receive's GRH bytes and its completion's
// flags and source LID (AHFromGRH, AHFromWC), and rping's pattern over a
// buffer of any length. Nothing panics; each refusal is ErrPeer; what is
// taken is what the bytes say.
func FuzzDecoders(f *testing.F) {
	info := make([]byte, rpingInfoSize)
	rpingInfo{Buf: 0x1000, RKey: 7, Size: 64}.encode(info)
	f.Add(info, uint8(0), uint16(0), false)
	g6 := make([]byte, GRHSize)
	g6[0] = 0x60
	g6[20] = 0x45
	f.Add(g6, uint8(verbs.WCGRH), uint16(3), false)
	g4 := make([]byte, GRHSize)
	copy(g4[20:], []byte{0x45, 0, 0, 20, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2})
	f.Add(g4, uint8(verbs.WCGRH|verbs.WCWithImm), uint16(0), true)
	f.Add([]byte{}, uint8(0), uint16(5), false)
	f.Fuzz(func(t *testing.T, b []byte, flags uint8, slid uint16, roce bool) {
		if i, err := decodeRpingInfo(b); err == nil {
			enc := make([]byte, rpingInfoSize)
			i.encode(enc)
			require.Equal(t, b, enc)
		} else {
			require.ErrorIs(t, err, ErrPeer)
		}
		wc := verbs.WC{Flags: verbs.WCFlags(flags & 3), SLID: slid}
		ah, err := AHFromGRH(b, wc, 1, 2)
		if err != nil {
			require.ErrorIs(t, err, ErrPeer)
		} else {
			require.GreaterOrEqual(t, len(b), GRHSize)
			require.True(t, ah.IsGlobal)
			require.Equal(t, uint8(2), ah.GRH.SGIDIndex)
			v, err := grhVersion(b)
			require.NoError(t, err)
			if v == 4 {
				require.Equal(t, qpattr.GID(netip.AddrFrom16(netip.AddrFrom4([4]byte(b[32:36])).As16()).As16()), ah.GRH.DGID)
			} else {
				require.Equal(t, b[8:24], ah.GRH.DGID[:])
			}
		}
		ah, err = AHFromWC(b, wc, cm.PortInfo{Num: 1, RoCE: roce})
		switch {
		case err != nil:
			require.ErrorIs(t, err, ErrPeer)
		case wc.Flags&verbs.WCGRH == 0 && !roce:
			require.False(t, ah.IsGlobal)
			require.Equal(t, slid, ah.DLID)
			require.NotZero(t, ah.DLID)
		default:
			require.True(t, ah.IsGlobal)
		}
		if len(b) <= rpingMaxSize {
			p := make([]byte, len(b))
			rpingPattern(p, int(slid))
			if len(p) > 0 {
				require.Zero(t, p[len(p)-1])
			}
		}
	})
}
