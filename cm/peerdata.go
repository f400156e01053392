package cm

import (
	"bytes"

	"github.com/ibcm/ibcm/cm/wire"
)

// What a connection keeps of the private data its peer sent: the last of
// each kind of message, for PeerPrivateData.

// peerData is the private data of the peer's last message of one kind.
type peerData struct {
	attr wire.AttrID
	size int
	data []byte // nil while the field is all zero, as it mostly is
}

// zeroPD is a private data field of zeros, for any message.
var zeroPD [wire.MADSize]byte

// remember keeps the private data of a message the peer sent on this
// connection; under the lock.
func (c *Conn) remember(msg *wire.MAD) {
	if msg == nil {
		return
	}
	pd := msg.PrivateData()
	if pd == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.peerDataOf(msg.AttrID)
	if e == nil {
		if c.peerPD == nil {
			c.peerPD = make([]peerData, 0, 4)
		}
		c.peerPD = append(c.peerPD, peerData{attr: msg.AttrID})
		e = &c.peerPD[len(c.peerPD)-1]
	}
	e.size = len(pd)
	if bytes.Equal(pd, zeroPD[:len(pd)]) {
		e.data = nil
	} else {
		e.data = append(e.data[:0], pd...)
	}
}

// peerDataOf is the private data kept of the peer's messages of kind a,
// or nil; under c.mu.
func (c *Conn) peerDataOf(a wire.AttrID) *peerData {
	for i := range c.peerPD {
		if c.peerPD[i].attr == a {
			return &c.peerPD[i]
		}
	}
	return nil
}

// PeerPrivateData returns the private data of the last message of kind a
// the peer sent on this connection, or nil if none came. Every message
// comes this one way: wire.AttrREQ (92 bytes), AttrREP (196), AttrRTU
// (224), AttrMRA (222), AttrREJ (148), AttrDREQ (220), AttrDREP (224),
// AttrLAP (168), AttrAPR (148), the field sizes of wire's
// ...PrivateDataSize constants. It is the whole field: the wire carries no
// length, so a protocol over it says how much is meaningful (as the RDMA
// IP CM header does).
func (c *Conn) PeerPrivateData(a wire.AttrID) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.peerDataOf(a)
	switch {
	case e == nil:
		return nil
	case e.data == nil:
		return make([]byte, e.size)
	}
	return bytes.Clone(e.data)
}
