package wire

// This file holds hand-written conveniences over the generated messages.

import (
	"encoding/binary"
	"time"
)

// RejectedInfo returns the meaningful bytes of the ARI: RejectedInfoLength
// of them, at most the field's ARISize (a peer may send any 7-bit length).
func (m *REJ) RejectedInfo() []byte {
	return m.ARI[:min(int(m.RejectedInfoLength), len(m.ARI))]
}

// Info returns the meaningful bytes of the additional information:
// AdditionalInformationLength of them, at most the field's 72 (a peer may
// send any 8-bit length).
func (m *APR) Info() []byte {
	return m.AdditionalInformation[:min(int(m.AdditionalInformationLength), len(m.AdditionalInformation))]
}

// Info returns the meaningful bytes of the additional information:
// AdditionalInformationLength of them, at most the field's 72.
func (m *SIDRRep) Info() []byte {
	return m.AdditionalInformation[:min(int(m.AdditionalInformationLength), len(m.AdditionalInformation))]
}

// ClassPortInfo decodes the ARI of a REJ with reason RejectPortCMRedirect.
func (m *REJ) ClassPortInfo() (ClassPortInfo, error) {
	var c ClassPortInfo
	err := c.Decode(m.ARI[:])
	return c, err
}

// ARIGUID returns the CA GUID at the start of the ARI, which a REJ with
// reason RejectTimeout carries: the sender's GUID, since the REJ has no
// field for it. ok is false when the ARI is shorter than a GUID.
func (m *REJ) ARIGUID() (guid uint64, ok bool) {
	if m.RejectedInfoLength < 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(m.ARI[:8]), true
}

// SetARIGUID puts guid as the whole ARI (for reason RejectTimeout) and sets
// RejectedInfoLength to 8.
func (m *REJ) SetARIGUID(guid uint64) {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], guid)
	_ = m.SetARI(b[:]) // 8 bytes always fit
}

// SetARI copies p into ARI, zeroes the rest and sets RejectedInfoLength to
// len(p). It fails with ErrPrivateDataTooLong when len(p) > ARISize.
func (m *REJ) SetARI(p []byte) error {
	if err := setBytes(m.ARI[:], p, "REJ", "ARI"); err != nil {
		return err
	}
	m.RejectedInfoLength = uint8(len(p))
	return nil
}

// SetClassPortInfo puts c in the ARI (for reason RejectPortCMRedirect) and
// sets RejectedInfoLength to ClassPortInfoSize.
func (m *REJ) SetClassPortInfo(c *ClassPortInfo) error {
	if err := c.Encode(m.ARI[:]); err != nil {
		return err
	}
	m.RejectedInfoLength = ClassPortInfoSize
	return nil
}

// ClassPortInfo decodes the additional information of a SIDR_REP with status
// SIDRRedirect.
func (m *SIDRRep) ClassPortInfo() (ClassPortInfo, error) {
	var c ClassPortInfo
	err := c.Decode(m.AdditionalInformation[:])
	return c, err
}

// SetClassPortInfo puts c in AdditionalInformation and sets
// AdditionalInformationLength to ClassPortInfoSize.
func (m *SIDRRep) SetClassPortInfo(c *ClassPortInfo) error {
	if err := c.Encode(m.AdditionalInformation[:]); err != nil {
		return err
	}
	m.AdditionalInformationLength = ClassPortInfoSize
	return nil
}

// SetAdditionalInformation copies p into AdditionalInformation, zeroes the
// rest and sets AdditionalInformationLength to len(p).
func (m *SIDRRep) SetAdditionalInformation(p []byte) error {
	if err := setBytes(m.AdditionalInformation[:], p, "SIDR_REP", "AdditionalInformation"); err != nil {
		return err
	}
	m.AdditionalInformationLength = uint8(len(p))
	return nil
}

// ClassPortInfo decodes the additional information of an APR with status
// APRRedirect.
func (m *APR) ClassPortInfo() (ClassPortInfo, error) {
	var c ClassPortInfo
	err := c.Decode(m.AdditionalInformation[:])
	return c, err
}

// SetAdditionalInformation copies p into AdditionalInformation, zeroes the
// rest and sets AdditionalInformationLength to len(p).
func (m *APR) SetAdditionalInformation(p []byte) error {
	if err := setBytes(m.AdditionalInformation[:], p, "APR", "AdditionalInformation"); err != nil {
		return err
	}
	m.AdditionalInformationLength = uint8(len(p))
	return nil
}

// REPWait is how long the active side waits for the REP (or an MRA) after
// each try of this REQ: 2 × the packet life time, which the Local ACK
// Timeout stands in for as in Linux, plus the Remote CM Response Timeout.
// The passive side reads it as the time it has to answer.
func (m *REQ) REPWait() time.Duration {
	return TimeoutDuration(m.PrimaryLocalAckTimeout) + TimeoutDuration(m.RemoteCMResponseTimeout)
}

// RTUWait is how long the passive side waits for the RTU (or an MRA) after
// each try of its REP to this REQ: the REQ's Local CM Response Timeout. The
// active side reads it as the time it has to answer the REP.
func (m *REQ) RTUWait() time.Duration {
	return TimeoutDuration(m.LocalCMResponseTimeout)
}

// ECEVendorID returns the 24-bit ECE vendor ID split over VendorIDH/M/L.
func (m *REP) ECEVendorID() uint32 {
	return uint32(m.VendorIDH)<<16 | uint32(m.VendorIDM)<<8 | uint32(m.VendorIDL)
}

// SetECEVendorID splits a 24-bit ECE vendor ID into VendorIDH/M/L.
func (m *REP) SetECEVendorID(id uint32) error {
	if id > 0xFFFFFF {
		return rangeError("REP", "VendorID", uint64(id), 24)
	}
	m.VendorIDH, m.VendorIDM, m.VendorIDL = uint8(id>>16), uint8(id>>8), uint8(id)
	return nil
}

// ECEVendorID returns the 24-bit ECE vendor ID split over VendorIDH/L.
func (m *SIDRRep) ECEVendorID() uint32 {
	return uint32(m.VendorIDH)<<8 | uint32(m.VendorIDL)
}

// SetECEVendorID splits a 24-bit ECE vendor ID into VendorIDH/L.
func (m *SIDRRep) SetECEVendorID(id uint32) error {
	if id > 0xFFFFFF {
		return rangeError("SIDR_REP", "VendorID", uint64(id), 24)
	}
	m.VendorIDH, m.VendorIDL = uint16(id>>8), uint8(id)
	return nil
}
