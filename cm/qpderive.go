package cm

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/cm/wire"
)

// derive computes the attributes for s from the connection's messages.
//
// Interim: the full derivation (paths, GRH, P_Key and GID indexes, timeouts,
// alternate path) comes with cm/qpattr's; until then the attributes carry
// what the ordering of the lifecycle needs.
func (c *Conn) derive(rep *wire.REP, s qpattr.State) (qpattr.Attr, error) {
	a := qpattr.Attr{State: s, Mask: qpattr.MaskState}
	switch s {
	case qpattr.Init:
		a.Mask |= qpattr.MaskAccessFlags | qpattr.MaskPKeyIndex | qpattr.MaskPort
		a.PortNum = c.m.port.Num
	case qpattr.RTR:
		a.Mask |= qpattr.MaskAV | qpattr.MaskPathMTU | qpattr.MaskDestQPN | qpattr.MaskRQPSN
		a.PathMTU = uint8(c.req.PathPacketPayloadMTU)
		if c.active {
			a.DestQPN, a.RQPSN = rep.LocalQPN, c.req.StartingPSN
		} else {
			a.DestQPN, a.RQPSN = c.req.LocalQPN, rep.StartingPSN
		}
	case qpattr.RTS:
		a.Mask |= qpattr.MaskSQPSN
		if c.active {
			a.SQPSN = rep.StartingPSN
		} else {
			a.SQPSN = c.req.StartingPSN
		}
	default:
		return a, fmt.Errorf("%w: no attributes for QP state %s", ErrBadParam, s)
	}
	return a, nil
}
