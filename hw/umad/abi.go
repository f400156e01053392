package umad

import (
	"encoding/binary"
	"unsafe"
)

// ABI of include/uapi/rdma/ib_user_mad.h (ABI version 5) and the ioctl numbers
// of include/uapi/rdma/rdma_user_ioctl.h. abi_test.go checks every size and
// offset here against the C header.

// ABIVersion is the only user_mad ABI this package speaks
// (/sys/class/infiniband_mad/abi_version).
const ABIVersion = 5

// userMADHdr is struct ib_user_mad_hdr, the P_Key-index layout that
// IB_USER_MAD_ENABLE_PKEY selects. Fields the kernel declares __be16/__be32
// are kept as byte arrays so their byte order is explicit; the others are in
// host order.
type userMADHdr struct {
	ID           uint32
	Status       uint32
	TimeoutMS    uint32
	Retries      uint32
	Length       uint32
	QPN          [4]byte // __be32
	QKey         [4]byte // __be32
	LID          [2]byte // __be16
	SL           uint8
	PathBits     uint8
	GRHPresent   uint8
	GIDIndex     uint8
	HopLimit     uint8
	TrafficClass uint8
	GID          [16]byte
	FlowLabel    [4]byte // __be32
	PKeyIndex    uint16
	Reserved     [6]byte
}

// hdrSize is sizeof(struct ib_user_mad_hdr) with P_Key index support.
const hdrSize = int(unsafe.Sizeof(userMADHdr{}))

// regReq is struct ib_user_mad_reg_req (IB_USER_MAD_REGISTER_AGENT). The
// method mask is an array of unsigned long aligned to 4 bytes; it is kept as
// raw bytes and filled by setMethodMask.
type regReq struct {
	ID               uint32
	MethodMask       [16]byte
	QPN              uint8
	MgmtClass        uint8
	MgmtClassVersion uint8
	OUI              [3]byte
	RMPPVersion      uint8
	_                uint8
}

// regReq2 is struct ib_user_mad_reg_req2 (IB_USER_MAD_REGISTER_AGENT2).
type regReq2 struct {
	ID               uint32
	QPN              uint32
	MgmtClass        uint8
	MgmtClassVersion uint8
	Res              uint16
	Flags            uint32
	MethodMask       [2]uint64
	OUI              uint32
	RMPPVersion      uint8
	Reserved         [3]byte
}

const (
	rdmaIoctlMagic = 0x1b

	nrRegisterAgent   = 0x01
	nrUnregisterAgent = 0x02
	nrEnablePKey      = 0x03
	nrRegisterAgent2  = 0x04
)

// The ioctl request numbers, built like the kernel's _IO/_IOW/_IOWR macros
// (the encoding of ioctl directions differs per architecture: ioc_*.go).
var (
	ioctlRegisterAgent   = ioc(iocRead|iocWrite, rdmaIoctlMagic, nrRegisterAgent, unsafe.Sizeof(regReq{}))
	ioctlUnregisterAgent = ioc(iocWrite, rdmaIoctlMagic, nrUnregisterAgent, 4)
	ioctlEnablePKey      = ioc(iocNone, rdmaIoctlMagic, nrEnablePKey, 0)
	ioctlRegisterAgent2  = ioc(iocRead|iocWrite, rdmaIoctlMagic, nrRegisterAgent2, unsafe.Sizeof(regReq2{}))
)

func ioc(dir, typ, nr uint, size uintptr) uint {
	return dir<<iocDirShift | uint(size)<<iocSizeShift | typ<<8 | nr
}

// bytesOf views a fixed-layout ABI struct as the bytes the kernel sees.
func bytesOf[T userMADHdr | regReq | regReq2](v *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(v)), unsafe.Sizeof(*v))
}

// setMethodMask sets bit m of the kernel's 128-bit method bitmap, stored as
// an array of unsigned long in host order (set_bit semantics).
func (r *regReq) setMethodMask(methods ...uint8) {
	const w = int(unsafe.Sizeof(uintptr(0)))
	for _, m := range methods {
		if m >= 128 {
			continue // the bitmap covers methods 0..127 (no R bit)
		}
		word, bit := int(m)/(8*w), uint(m)%(8*uint(w))
		b := r.MethodMask[word*w : (word+1)*w]
		if w == 8 {
			binary.NativeEndian.PutUint64(b, binary.NativeEndian.Uint64(b)|1<<bit)
		} else {
			binary.NativeEndian.PutUint32(b, binary.NativeEndian.Uint32(b)|1<<bit)
		}
	}
}

func (r *regReq2) setMethodMask(methods ...uint8) {
	for _, m := range methods {
		if m >= 128 {
			continue
		}
		r.MethodMask[m/64] |= 1 << (m % 64)
	}
}
