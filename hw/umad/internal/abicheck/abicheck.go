//go:build cgo

// Package abicheck reports the C layout of include/uapi/rdma/ib_user_mad.h
// and the user_mad ioctl numbers as the system's C compiler sees them. It
// exists only for hw/umad's ABI test (Go forbids cgo in _test.go files); the
// umad library never imports it.
package abicheck

/*
#include <stddef.h>
#include <rdma/ib_user_mad.h>
#include <rdma/rdma_user_ioctl.h>

#define F(s, f) { #s, #f, offsetof(struct s, f), sizeof(((struct s *)0)->f) }
struct field { const char *st, *name; size_t off, size; };
static const struct field fields[] = {
	F(ib_user_mad_hdr, id), F(ib_user_mad_hdr, status), F(ib_user_mad_hdr, timeout_ms),
	F(ib_user_mad_hdr, retries), F(ib_user_mad_hdr, length), F(ib_user_mad_hdr, qpn),
	F(ib_user_mad_hdr, qkey), F(ib_user_mad_hdr, lid), F(ib_user_mad_hdr, sl),
	F(ib_user_mad_hdr, path_bits), F(ib_user_mad_hdr, grh_present), F(ib_user_mad_hdr, gid_index),
	F(ib_user_mad_hdr, hop_limit), F(ib_user_mad_hdr, traffic_class), F(ib_user_mad_hdr, gid),
	F(ib_user_mad_hdr, flow_label), F(ib_user_mad_hdr, pkey_index), F(ib_user_mad_hdr, reserved),
	F(ib_user_mad_reg_req, id), F(ib_user_mad_reg_req, method_mask), F(ib_user_mad_reg_req, qpn),
	F(ib_user_mad_reg_req, mgmt_class), F(ib_user_mad_reg_req, mgmt_class_version),
	F(ib_user_mad_reg_req, oui), F(ib_user_mad_reg_req, rmpp_version),
	F(ib_user_mad_reg_req2, id), F(ib_user_mad_reg_req2, qpn), F(ib_user_mad_reg_req2, mgmt_class),
	F(ib_user_mad_reg_req2, mgmt_class_version), F(ib_user_mad_reg_req2, res), F(ib_user_mad_reg_req2, flags),
	F(ib_user_mad_reg_req2, method_mask), F(ib_user_mad_reg_req2, oui), F(ib_user_mad_reg_req2, rmpp_version),
	F(ib_user_mad_reg_req2, reserved),
};
static int nfields(void) { return sizeof(fields) / sizeof(fields[0]); }
static const char *field_struct(int i) { return fields[i].st; }
static const char *field_name(int i) { return fields[i].name; }
static size_t field_off(int i) { return fields[i].off; }
static size_t field_size(int i) { return fields[i].size; }

static size_t size_hdr(void) { return sizeof(struct ib_user_mad_hdr); }
static size_t size_hdr_old(void) { return sizeof(struct ib_user_mad_hdr_old); }
static size_t size_reg_req(void) { return sizeof(struct ib_user_mad_reg_req); }
static size_t size_reg_req2(void) { return sizeof(struct ib_user_mad_reg_req2); }
static size_t size_user_mad(void) { return sizeof(struct ib_user_mad); }

static unsigned long ioc_register_agent(void) { return IB_USER_MAD_REGISTER_AGENT; }
static unsigned long ioc_unregister_agent(void) { return IB_USER_MAD_UNREGISTER_AGENT; }
static unsigned long ioc_enable_pkey(void) { return IB_USER_MAD_ENABLE_PKEY; }
static unsigned long ioc_register_agent2(void) { return IB_USER_MAD_REGISTER_AGENT2; }
static int abi_version(void) { return IB_USER_MAD_ABI_VERSION; }
*/
import "C"

// Available is true when this package was built with cgo.
const Available = true

// Field is the C offset and size of one struct member.
type Field struct {
	Struct, Name string
	Offset, Size uintptr
}

// Fields lists the members of ib_user_mad_hdr, ib_user_mad_reg_req and
// ib_user_mad_reg_req2.
func Fields() []Field {
	var fs []Field
	for i := 0; i < int(C.nfields()); i++ {
		fs = append(fs, Field{
			Struct: C.GoString(C.field_struct(C.int(i))),
			Name:   C.GoString(C.field_name(C.int(i))),
			Offset: uintptr(C.field_off(C.int(i))),
			Size:   uintptr(C.field_size(C.int(i))),
		})
	}
	return fs
}

// Sizes returns sizeof of the user_mad structs, by C name.
func Sizes() map[string]uintptr {
	return map[string]uintptr{
		"ib_user_mad_hdr":      uintptr(C.size_hdr()),
		"ib_user_mad_hdr_old":  uintptr(C.size_hdr_old()),
		"ib_user_mad_reg_req":  uintptr(C.size_reg_req()),
		"ib_user_mad_reg_req2": uintptr(C.size_reg_req2()),
		"ib_user_mad":          uintptr(C.size_user_mad()),
	}
}

// Ioctls returns the user_mad ioctl request numbers, by C macro name.
func Ioctls() map[string]uint {
	return map[string]uint{
		"IB_USER_MAD_REGISTER_AGENT":   uint(C.ioc_register_agent()),
		"IB_USER_MAD_UNREGISTER_AGENT": uint(C.ioc_unregister_agent()),
		"IB_USER_MAD_ENABLE_PKEY":      uint(C.ioc_enable_pkey()),
		"IB_USER_MAD_REGISTER_AGENT2":  uint(C.ioc_register_agent2()),
	}
}

// ABIVersion is IB_USER_MAD_ABI_VERSION.
func ABIVersion() int { return int(C.abi_version()) }
