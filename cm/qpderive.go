package cm

import (
	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

// derive computes the attributes for s from the connection's messages, as
// the kernel's ib_cm_init_qp_attr does (cm/qpattr); rep is the REP
// received (active) or sent or about to be sent (passive), zero until
// known.
func (c *Conn) derive(rep *wire.REP, s qpattr.State) (qpattr.Attr, error) {
	q := qpattr.Conn{Active: c.active, REQ: &c.req, LAP: c.lap, LAPSent: c.lapSent}
	if *rep != (wire.REP{}) {
		q.REP = rep
	}
	p := &c.m.port
	if c.active {
		q.Path = qpattr.Path{PacketLifeTime: p.PacketLifeTime}
	} else {
		// The kernel builds the passive address vector partly from the
		// REQ's work completion (ib_init_ah_attr_from_wc).
		q.Recv = qpattr.Recv{SLID: c.from.LID, SL: c.from.SL, PathBits: c.from.PathBits}
		switch {
		case p.RoCE:
			q.Recv.HopLimit = 64 // the IP route's default hop limit
		case c.from.GRH:
			q.Recv.HopLimit = 0xff
		}
	}
	port := p.Port()
	return q.Attr(&port, s)
}
