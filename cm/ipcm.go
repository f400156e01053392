package cm

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/wire"
)

// SetIPCM makes req a connection request in the RDMA IP CM service format,
// the way Linux rdma_cm sends it: the service ID of dstPort in the TCP port
// space (wire.IPServiceID) and the private data starting with the IP CM
// header h, followed by privateData (at most 56 bytes).
func SetIPCM(req *wire.REQ, h *wire.IPCMHeader, dstPort uint16, privateData []byte) error {
	var pd [wire.REQPrivateDataSize]byte
	if err := h.Encode(pd[:]); err != nil {
		return err
	}
	if len(privateData) > len(pd)-wire.IPCMHeaderSize {
		return fmt.Errorf("%w: %d bytes of private data after the IP CM header, at most %d",
			ErrBadParam, len(privateData), len(pd)-wire.IPCMHeaderSize)
	}
	copy(pd[wire.IPCMHeaderSize:], privateData)
	req.ServiceID = wire.IPServiceID(dstPort)
	req.PrivateData = pd
	return nil
}

// ParseIPCM is the passive side of SetIPCM: for a REQ whose service ID is
// in the IP CM TCP port space it returns the IP CM header, the destination
// port and the private data after the header.
func ParseIPCM(req *wire.REQ) (h wire.IPCMHeader, dstPort uint16, rest []byte, ok bool) {
	port, isIP := wire.IPServicePort(req.ServiceID)
	if !isIP {
		return h, 0, nil, false
	}
	if err := h.Decode(req.PrivateData[:]); err != nil {
		return h, 0, nil, false
	}
	return h, port, req.PrivateData[wire.IPCMHeaderSize:], true
}
