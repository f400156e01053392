package qpattr_test

import (
	"errors"
	"testing"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

const fuzzLen = 3*wire.DataSize + 8

// fuzzInput packs a REQ, a REP, a LAP and the flags FuzzAttr reads.
func fuzzInput(req *wire.REQ, rep *wire.REP, lap *wire.LAP, flags ...byte) []byte {
	b := make([]byte, fuzzLen)
	if err := req.Encode(b); err != nil {
		panic(err)
	}
	if err := rep.Encode(b[wire.DataSize:]); err != nil {
		panic(err)
	}
	if err := lap.Encode(b[2*wire.DataSize:]); err != nil {
		panic(err)
	}
	copy(b[3*wire.DataSize:], flags)
	return b
}

// Whatever the messages and the port hold, Attr returns attributes or one
// of its errors, and never panics.
func FuzzAttr(f *testing.F) {
	f.Add(make([]byte, fuzzLen))
	f.Add(fuzzInput(ibREQ(), ibREP(), lapFromA(), 0b0101, 1, 0x11, 2))
	f.Add(fuzzInput(withAlt(ibREQ()), ibREP(), lapFromA(), 0b1100, 1, 0, 1))
	f.Add(fuzzInput(roceREQ(), roceREP(), lapFromB(), 0b0111, 1, 1, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) < fuzzLen {
			return
		}
		var req wire.REQ
		var rep wire.REP
		var lap wire.LAP
		if req.Decode(b) != nil || rep.Decode(b[wire.DataSize:]) != nil || lap.Decode(b[2*wire.DataSize:]) != nil {
			t.Fatal("a decode of a full buffer failed")
		}
		fl := b[3*wire.DataSize:]
		c := qpattr.Conn{Active: fl[0]&1 != 0, REQ: &req, LAPSent: fl[0]&2 != 0,
			Recv: qpattr.Recv{SLID: uint16(fl[4]) << 8, SL: fl[5], PathBits: fl[6], HopLimit: fl[7]}}
		if fl[0]&4 != 0 {
			c.REP = &rep
		}
		if fl[0]&8 != 0 {
			c.LAP = &lap
		}
		// The port holds the GIDs the messages name, at indexes the input
		// picks, and the REQ's P_Key as a full or limited member.
		gids := []qpattr.GID{qpattr.GID(req.PrimaryLocalPortGID), qpattr.GID(req.PrimaryRemotePortGID),
			qpattr.GID(req.AlternateLocalPortGID), qpattr.GID(req.AlternateRemotePortGID),
			qpattr.GID(lap.AlternateLocalPortGID), qpattr.GID(lap.AlternateRemotePortGID)}
		gids = gids[:int(fl[3])%(len(gids)+1)]
		p := qpattr.Port{Num: fl[1], RoCE: fl[2]&1 != 0, LMC: fl[2] >> 1 & 0xf, GIDs: gids,
			PKeys: []uint16{0x8001, req.PartitionKey ^ uint16(fl[3]>>7)<<15}}
		for s := qpattr.State(0); s <= qpattr.Err+1; s++ {
			a, err := c.Attr(&p, s)
			if err != nil {
				if !isAttrError(err) {
					t.Fatalf("%v: untyped error %v", s, err)
				}
				if a != (qpattr.Attr{}) {
					t.Fatalf("%v: attributes with the error %v", s, err)
				}
				continue
			}
			if a.State != s || a.Mask == 0 {
				t.Fatalf("%v: got state %v mask %v", s, a.State, a.Mask)
			}
			if p.RoCE && a.Mask&qpattr.MaskAV != 0 && (!a.AH.IsGlobal || a.AH.DLID != 0) {
				t.Fatalf("%v: RoCE address vector %+v", s, a.AH)
			}
		}
	})
}

func isAttrError(err error) bool {
	for _, e := range []error{qpattr.ErrState, qpattr.ErrNoREP, qpattr.ErrPKey, qpattr.ErrGID, qpattr.ErrInvalid} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}
