package pbt

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"
	"github.com/stretchr/testify/require"
)

// qpSide is one side of a generated connection: its port, what it knows,
// and the local facts the other side's attributes must point at.
type qpSide struct {
	Port     qpattr.Port
	Conn     qpattr.Conn
	GID      qpattr.GID // the side's own GID (alternate: AltGID)
	AltGID   qpattr.GID
	LID      uint16 // IB
	AltLID   uint16
	QPN, PSN uint32
}

// qpCase is a connection between A (active) and B (passive) over random
// port tables: RC or UC, IB (subnet-local, with or without a GRH, with or
// without an alternate path) or RoCE (IPv4-mapped GIDs, permissive LIDs).
type qpCase struct {
	RoCE, RC, Alt bool
	A, B          qpSide
}

func (c *qpCase) String() string {
	return fmt.Sprintf("RoCE=%v RC=%v Alt=%v\nREQ %+v\nREP %+v\nA port %+v\nB port %+v\nB recv %+v",
		c.RoCE, c.RC, c.Alt, *c.A.Conn.REQ, *c.A.Conn.REP, c.A.Port, c.B.Port, c.B.Conn.Recv)
}

func randGID(r *rand.Rand, roce bool) qpattr.GID {
	var g qpattr.GID
	if roce {
		g[10], g[11] = 0xff, 0xff
		r.Read(g[12:])
		g[12] |= 1 // never 0.0.0.0
		return g
	}
	g[0], g[1] = 0xfe, 0x80
	r.Read(g[8:])
	g[15] |= 1
	return g
}

// portTable is a GID table of 1–8 entries holding own (and alt, when set)
// at random places; the other entries are other GIDs or, on RoCE, zeroed
// RoCE v1 slots.
func portTable(r *rand.Rand, roce bool, own ...qpattr.GID) []qpattr.GID {
	t := make([]qpattr.GID, len(own)+r.Intn(7))
	for i := range t {
		if roce && r.Intn(3) == 0 {
			continue
		}
		for {
			g := randGID(r, roce)
			if g != own[0] && (len(own) < 2 || g != own[1]) {
				t[i] = g
				break
			}
		}
	}
	for i, p := range r.Perm(len(t))[:len(own)] {
		t[p] = own[i]
	}
	return t
}

// pkeyTable holds the partition key as a full or limited member, 1–3
// times, among 0–5 other keys.
func pkeyTable(r *rand.Rand, pkey uint16) []uint16 {
	var t []uint16
	for range 1 + r.Intn(3) {
		t = append(t, pkey&0x7fff|uint16(r.Intn(2))<<15)
	}
	for range r.Intn(6) {
		k := uint16(r.Intn(0x10000))
		if k&0x7fff != pkey&0x7fff {
			t = append(t, k)
		}
	}
	r.Shuffle(len(t), func(i, j int) { t[i], t[j] = t[j], t[i] })
	return t
}

func genQPCase() gopter.Gen {
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		r := gp.Rng
		c := &qpCase{RoCE: r.Intn(2) == 0, RC: r.Intn(4) != 0}
		c.Alt = !c.RoCE && r.Intn(2) == 0
		u24 := func() uint32 { return uint32(r.Intn(1 << 24)) }
		lid := func() uint16 { return uint16(1 + r.Intn(0xbffe)) }
		for _, s := range []*qpSide{&c.A, &c.B} {
			s.GID, s.AltGID, s.QPN, s.PSN = randGID(r, c.RoCE), randGID(r, c.RoCE), u24(), u24()
			s.LID, s.AltLID = lid(), lid()
		}
		pkey := uint16(r.Intn(0x10000))
		lifeA, delayA, delayB := uint8(r.Intn(32)), uint8(r.Intn(32)), uint8(r.Intn(32))
		req := &wire.REQ{
			LocalQPN: c.A.QPN, StartingPSN: c.A.PSN, TransportServiceType: wire.TransportUC,
			ResponderResources: uint8(r.Intn(17)), InitiatorDepth: uint8(r.Intn(17)),
			RetryCount: uint8(r.Intn(8)), RNRRetryCount: uint8(r.Intn(8)), PartitionKey: pkey,
			PathPacketPayloadMTU: wire.MTU(1 + r.Intn(5)),
			PrimaryLocalPortGID:  wire.GID(c.A.GID), PrimaryRemotePortGID: wire.GID(c.B.GID),
			PrimaryFlowLabel: uint32(r.Intn(1 << 20)), PrimaryPacketRate: uint8(r.Intn(64)),
			PrimaryTrafficClass: uint8(r.Intn(256)), PrimarySL: uint8(r.Intn(16)),
			PrimaryLocalAckTimeout: qpattr.AckTimeout(delayA, lifeA),
		}
		if c.RC {
			req.TransportServiceType = wire.TransportRC
		}
		recv := qpattr.Recv{SLID: c.A.LID, SL: req.PrimarySL}
		if c.RoCE {
			req.PrimaryLocalPortLID, req.PrimaryRemotePortLID = 0xffff, 0xffff
			req.PrimaryHopLimit = uint8(1 + r.Intn(255))
			recv.HopLimit = uint8(1 + r.Intn(255)) // the passive side's own route
		} else {
			req.PrimaryLocalPortLID, req.PrimaryRemotePortLID, req.PrimarySubnetLocal = c.A.LID, c.B.LID, true
			req.PrimaryHopLimit = uint8(r.Intn(2)) // subnet-local: no GRH, or one with hop limit 1
			if req.PrimaryHopLimit > 0 {
				recv.HopLimit = 0xff // the REQ came with a GRH
			}
		}
		lifeAlt := uint8(r.Intn(32))
		if c.Alt {
			req.AlternateLocalPortLID, req.AlternateRemotePortLID, req.AlternateSubnetLocal = c.A.AltLID, c.B.AltLID, true
			req.AlternateLocalPortGID, req.AlternateRemotePortGID = wire.GID(c.A.AltGID), wire.GID(c.B.AltGID)
			req.AlternateSL, req.AlternatePacketRate = uint8(r.Intn(16)), uint8(r.Intn(64))
			req.AlternateHopLimit = uint8(r.Intn(2))
			req.AlternateLocalAckTimeout = qpattr.AckTimeout(delayA, lifeAlt)
		}
		rep := &wire.REP{LocalQPN: c.B.QPN, StartingPSN: c.B.PSN,
			ResponderResources: uint8(r.Intn(17)), InitiatorDepth: uint8(r.Intn(17)),
			TargetAckDelay: delayB, RNRRetryCount: uint8(r.Intn(8))}
		c.A.Conn = qpattr.Conn{Active: true, REQ: req, REP: rep,
			Path: qpattr.Path{PacketLifeTime: lifeA}, AltPath: qpattr.Path{PacketLifeTime: lifeAlt}}
		c.B.Conn = qpattr.Conn{REQ: req, REP: rep, Recv: recv}
		for _, s := range []*qpSide{&c.A, &c.B} {
			own := []qpattr.GID{s.GID}
			if c.Alt {
				own = append(own, s.AltGID)
			}
			s.Port = qpattr.Port{Num: uint8(1 + r.Intn(2)), RoCE: c.RoCE, LMC: uint8(r.Intn(4)),
				PKeys: pkeyTable(r, pkey), GIDs: portTable(r, c.RoCE, own...)}
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// qpAttrs are one side's INIT, RTR and RTS attributes.
type qpAttrs struct{ Init, RTR, RTS qpattr.Attr }

func (s *qpSide) attrs() (qpAttrs, error) {
	var a qpAttrs
	var err error
	for _, x := range []struct {
		st  qpattr.State
		dst *qpattr.Attr
	}{{qpattr.Init, &a.Init}, {qpattr.RTR, &a.RTR}, {qpattr.RTS, &a.RTS}} {
		if *x.dst, err = s.Conn.Attr(&s.Port, x.st); err != nil {
			return a, fmt.Errorf("%v: %w", x.st, err)
		}
	}
	return a, nil
}

// mirrorProblems lists where the two sides' attributes fail to mirror each
// other: each side must address the other's QP, PSNs, read depths and
// port, and resolve its own GID and the connection's P_Key locally.
func mirrorProblems(c *qpCase, a, b qpAttrs) []string {
	var bad []string
	check := func(ok bool, format string, args ...any) {
		if !ok {
			bad = append(bad, fmt.Sprintf(format, args...))
		}
	}
	check(a.RTR.DestQPN == c.B.QPN && b.RTR.DestQPN == c.A.QPN, "dest QPNs %#x %#x, QPNs A %#x B %#x", a.RTR.DestQPN, b.RTR.DestQPN, c.A.QPN, c.B.QPN)
	check(a.RTS.SQPSN == b.RTR.RQPSN && b.RTS.SQPSN == a.RTR.RQPSN, "PSNs: A sq %#x rq %#x, B sq %#x rq %#x", a.RTS.SQPSN, a.RTR.RQPSN, b.RTS.SQPSN, b.RTR.RQPSN)
	check(a.RTS.SQPSN == c.B.PSN && b.RTS.SQPSN == c.A.PSN, "SQ PSNs are not the peer's starting PSN")
	check(a.RTR.PathMTU == b.RTR.PathMTU && a.RTR.PathMTU == uint8(c.A.Conn.REQ.PathPacketPayloadMTU), "path MTU %d %d", a.RTR.PathMTU, b.RTR.PathMTU)
	check(a.RTR.Mask == b.RTR.Mask && a.RTS.Mask == b.RTS.Mask && a.Init.Mask == b.Init.Mask, "masks differ: RTR %v / %v, RTS %v / %v", a.RTR.Mask, b.RTR.Mask, a.RTS.Mask, b.RTS.Mask)
	req, rep := c.A.Conn.REQ, c.A.Conn.REP
	if c.RC {
		check(a.RTS.MaxRdAtomic == b.RTR.MaxDestRdAtomic && b.RTS.MaxRdAtomic == a.RTR.MaxDestRdAtomic,
			"read depths: A out %d in %d, B out %d in %d", a.RTS.MaxRdAtomic, a.RTR.MaxDestRdAtomic, b.RTS.MaxRdAtomic, b.RTR.MaxDestRdAtomic)
		check(a.RTS.RetryCnt == req.RetryCount && b.RTS.RetryCnt == req.RetryCount, "retry counts %d %d, REQ %d", a.RTS.RetryCnt, b.RTS.RetryCnt, req.RetryCount)
		// Each side retries RNR NAKs as many times as its peer asked.
		check(a.RTS.RNRRetry == rep.RNRRetryCount && b.RTS.RNRRetry == req.RNRRetryCount, "RNR retries %d %d", a.RTS.RNRRetry, b.RTS.RNRRetry)
		check(a.RTS.Timeout != 0 && b.RTS.Timeout != 0, "a zero (infinite) ACK timeout")
		check(a.RTR.MinRNRTimer == 0 && b.RTR.MinRNRTimer == 0, "min RNR timer")
	} else {
		check(a.RTS.Mask&(qpattr.MaskRetryCnt|qpattr.MaskTimeout|qpattr.MaskMaxQPRdAtomic) == 0 && a.RTR.Mask&qpattr.MaskMaxDestRdAtomic == 0, "UC with RC fields: %v, %v", a.RTR.Mask, a.RTS.Mask)
	}
	for _, x := range []struct {
		name   string
		me     *qpSide
		peer   *qpSide
		at     qpAttrs
		inRead uint8 // the reads the peer asked for when the QP went to INIT
	}{{"A", &c.A, &c.B, a, rep.InitiatorDepth}, {"B", &c.B, &c.A, b, req.InitiatorDepth}} {
		ah, p := x.at.RTR.AH, &x.me.Port
		check(ah.PortNum == p.Num && x.at.Init.PortNum == p.Num, "%s: port %d, AV port %d, want %d", x.name, x.at.Init.PortNum, ah.PortNum, p.Num)
		check(int(x.at.Init.PKeyIndex) < len(p.PKeys) && p.PKeys[x.at.Init.PKeyIndex]&0x7fff == req.PartitionKey&0x7fff,
			"%s: P_Key index %d does not hold %#x", x.name, x.at.Init.PKeyIndex, req.PartitionKey)
		check(x.at.Init.Access&qpattr.RemoteRead != 0 == (x.inRead != 0), "%s: access %v with %d responder resources", x.name, x.at.Init.Access, x.inRead)
		check(ah.SL == req.PrimarySL && ah.StaticRate == req.PrimaryPacketRate, "%s: SL %d rate %d", x.name, ah.SL, ah.StaticRate)
		global := c.RoCE || req.PrimaryHopLimit > 0
		check(ah.IsGlobal == global, "%s: IsGlobal %v", x.name, ah.IsGlobal)
		if global {
			check(ah.GRH.DGID == x.peer.GID, "%s: DGID %v, the peer's GID is %v", x.name, wire.GID(ah.GRH.DGID), wire.GID(x.peer.GID))
			check(int(ah.GRH.SGIDIndex) < len(p.GIDs) && p.GIDs[ah.GRH.SGIDIndex] == x.me.GID, "%s: SGID index %d is not its own GID", x.name, ah.GRH.SGIDIndex)
			check(ah.GRH.FlowLabel == req.PrimaryFlowLabel && ah.GRH.TrafficClass == req.PrimaryTrafficClass, "%s: flow label or traffic class", x.name)
		}
		if c.RoCE {
			check(ah.DLID == 0 && ah.SrcPathBits == 0, "%s: RoCE with DLID %#x path bits %#x", x.name, ah.DLID, ah.SrcPathBits)
		} else {
			check(ah.DLID == x.peer.LID, "%s: DLID %#x, the peer's LID is %#x", x.name, ah.DLID, x.peer.LID)
			check(ah.SrcPathBits == uint8(x.me.LID&(1<<p.LMC-1)), "%s: path bits %#x of LID %#x LMC %d", x.name, ah.SrcPathBits, x.me.LID, p.LMC)
		}
		hasAlt := x.at.RTR.Mask&qpattr.MaskAltPath != 0
		check(hasAlt == c.Alt && (x.at.RTS.Mask&qpattr.MaskPathMigState != 0) == c.Alt, "%s: alternate path loaded %v, REQ has one %v", x.name, hasAlt, c.Alt)
		if c.Alt {
			alt := x.at.RTR.AltAH
			check(alt.DLID == x.peer.AltLID && alt.SL == req.AlternateSL, "%s: alternate DLID %#x SL %d", x.name, alt.DLID, alt.SL)
			check(x.at.RTR.AltPortNum == p.Num && x.at.RTR.AltTimeout != 0, "%s: alternate port %d timeout %d", x.name, x.at.RTR.AltPortNum, x.at.RTR.AltTimeout)
			check(int(x.at.RTR.AltPKeyIndex) < len(p.PKeys) && p.PKeys[x.at.RTR.AltPKeyIndex]&0x7fff == req.PartitionKey&0x7fff,
				"%s: alternate P_Key index %d", x.name, x.at.RTR.AltPKeyIndex)
			check(alt.IsGlobal == (req.AlternateHopLimit > 0), "%s: alternate IsGlobal %v", x.name, alt.IsGlobal)
			if alt.IsGlobal {
				check(alt.GRH.DGID == x.peer.AltGID && int(alt.GRH.SGIDIndex) < len(p.GIDs) && p.GIDs[alt.GRH.SGIDIndex] == x.me.AltGID,
					"%s: alternate GIDs", x.name)
			}
		}
	}
	return bad
}

func qpMirror(c *qpCase) string {
	a, err := c.A.attrs()
	if err != nil {
		return "A: " + err.Error() + "\n" + c.String()
	}
	b, err := c.B.attrs()
	if err != nil {
		return "B: " + err.Error() + "\n" + c.String()
	}
	if bad := mirrorProblems(c, a, b); len(bad) > 0 {
		return fmt.Sprintf("%q\n%s", bad, c)
	}
	return ""
}

// The two sides of a connection derive mirrored QP attributes, for random
// REQ/REP pairs over random port tables.
func TestQPAttrMirror(t *testing.T) {
	n := 2000
	if testing.Short() {
		n = 200
	}
	params := gopter.DefaultTestParametersWithSeed(seed(t))
	params.MinSuccessfulTests = n
	props := gopter.NewProperties(params)
	props.Property("A and B address each other", prop.ForAll(qpMirror, genQPCase()))
	props.TestingRun(t)
}

// The mirror check bites: it refuses attributes with one field of one side
// broken, for each of the facts it checks.
func TestQPAttrMirrorBites(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(seed(t))
	var c *qpCase
	for c == nil || !c.RC || c.RoCE || !c.Alt || c.A.Conn.REQ.PrimaryHopLimit == 0 {
		c = genQPCase()(gopter.DefaultGenParameters().WithSize(1).CloneWithSeed(params.Rng.Int63())).Result.(*qpCase)
	}
	a, err := c.A.attrs()
	require.NoError(t, err)
	b, err := c.B.attrs()
	require.NoError(t, err)
	require.Empty(t, mirrorProblems(c, a, b))
	for name, breakIt := range map[string]func(a, b *qpAttrs){
		"dest QPN":         func(a, b *qpAttrs) { a.RTR.DestQPN ^= 1 },
		"SQ PSN":           func(a, b *qpAttrs) { b.RTS.SQPSN ^= 1 },
		"RQ PSN":           func(a, b *qpAttrs) { a.RTR.RQPSN ^= 1 },
		"read depth":       func(a, b *qpAttrs) { a.RTS.MaxRdAtomic++ },
		"MTU":              func(a, b *qpAttrs) { b.RTR.PathMTU++ },
		"retry count":      func(a, b *qpAttrs) { a.RTS.RetryCnt ^= 1 },
		"RNR retry":        func(a, b *qpAttrs) { b.RTS.RNRRetry ^= 1 },
		"DGID":             func(a, b *qpAttrs) { a.RTR.AH.GRH.DGID[15] ^= 1 },
		"SGID index":       func(a, b *qpAttrs) { b.RTR.AH.GRH.SGIDIndex++ },
		"DLID":             func(a, b *qpAttrs) { b.RTR.AH.DLID ^= 1 },
		"P_Key index":      func(a, b *qpAttrs) { a.Init.PKeyIndex = uint16(len(c.A.Port.PKeys)) },
		"alternate DLID":   func(a, b *qpAttrs) { a.RTR.AltAH.DLID ^= 1 },
		"no path rearm":    func(a, b *qpAttrs) { b.RTS.Mask &^= qpattr.MaskPathMigState },
		"access":           func(a, b *qpAttrs) { a.Init.Access ^= qpattr.RemoteRead },
		"infinite timeout": func(a, b *qpAttrs) { b.RTS.Timeout = 0 },
	} {
		a2, b2 := a, b
		breakIt(&a2, &b2)
		require.NotEmpty(t, mirrorProblems(c, a2, b2), "broken %s passes", name)
	}
}
