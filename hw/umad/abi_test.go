package umad

import (
	"encoding/binary"
	"testing"
	"unsafe"

	"github.com/ibcm/ibcm/hw/umad/internal/abicheck"
)

// goField is the Go counterpart of one C member: its offset and size.
type goField struct{ off, size uintptr }

func goFields() map[string]goField {
	var h userMADHdr
	var r regReq
	var r2 regReq2
	return map[string]goField{
		"ib_user_mad_hdr.id":            {unsafe.Offsetof(h.ID), unsafe.Sizeof(h.ID)},
		"ib_user_mad_hdr.status":        {unsafe.Offsetof(h.Status), unsafe.Sizeof(h.Status)},
		"ib_user_mad_hdr.timeout_ms":    {unsafe.Offsetof(h.TimeoutMS), unsafe.Sizeof(h.TimeoutMS)},
		"ib_user_mad_hdr.retries":       {unsafe.Offsetof(h.Retries), unsafe.Sizeof(h.Retries)},
		"ib_user_mad_hdr.length":        {unsafe.Offsetof(h.Length), unsafe.Sizeof(h.Length)},
		"ib_user_mad_hdr.qpn":           {unsafe.Offsetof(h.QPN), unsafe.Sizeof(h.QPN)},
		"ib_user_mad_hdr.qkey":          {unsafe.Offsetof(h.QKey), unsafe.Sizeof(h.QKey)},
		"ib_user_mad_hdr.lid":           {unsafe.Offsetof(h.LID), unsafe.Sizeof(h.LID)},
		"ib_user_mad_hdr.sl":            {unsafe.Offsetof(h.SL), unsafe.Sizeof(h.SL)},
		"ib_user_mad_hdr.path_bits":     {unsafe.Offsetof(h.PathBits), unsafe.Sizeof(h.PathBits)},
		"ib_user_mad_hdr.grh_present":   {unsafe.Offsetof(h.GRHPresent), unsafe.Sizeof(h.GRHPresent)},
		"ib_user_mad_hdr.gid_index":     {unsafe.Offsetof(h.GIDIndex), unsafe.Sizeof(h.GIDIndex)},
		"ib_user_mad_hdr.hop_limit":     {unsafe.Offsetof(h.HopLimit), unsafe.Sizeof(h.HopLimit)},
		"ib_user_mad_hdr.traffic_class": {unsafe.Offsetof(h.TrafficClass), unsafe.Sizeof(h.TrafficClass)},
		"ib_user_mad_hdr.gid":           {unsafe.Offsetof(h.GID), unsafe.Sizeof(h.GID)},
		"ib_user_mad_hdr.flow_label":    {unsafe.Offsetof(h.FlowLabel), unsafe.Sizeof(h.FlowLabel)},
		"ib_user_mad_hdr.pkey_index":    {unsafe.Offsetof(h.PKeyIndex), unsafe.Sizeof(h.PKeyIndex)},
		"ib_user_mad_hdr.reserved":      {unsafe.Offsetof(h.Reserved), unsafe.Sizeof(h.Reserved)},

		"ib_user_mad_reg_req.id":                 {unsafe.Offsetof(r.ID), unsafe.Sizeof(r.ID)},
		"ib_user_mad_reg_req.method_mask":        {unsafe.Offsetof(r.MethodMask), unsafe.Sizeof(r.MethodMask)},
		"ib_user_mad_reg_req.qpn":                {unsafe.Offsetof(r.QPN), unsafe.Sizeof(r.QPN)},
		"ib_user_mad_reg_req.mgmt_class":         {unsafe.Offsetof(r.MgmtClass), unsafe.Sizeof(r.MgmtClass)},
		"ib_user_mad_reg_req.mgmt_class_version": {unsafe.Offsetof(r.MgmtClassVersion), unsafe.Sizeof(r.MgmtClassVersion)},
		"ib_user_mad_reg_req.oui":                {unsafe.Offsetof(r.OUI), unsafe.Sizeof(r.OUI)},
		"ib_user_mad_reg_req.rmpp_version":       {unsafe.Offsetof(r.RMPPVersion), unsafe.Sizeof(r.RMPPVersion)},

		"ib_user_mad_reg_req2.id":                 {unsafe.Offsetof(r2.ID), unsafe.Sizeof(r2.ID)},
		"ib_user_mad_reg_req2.qpn":                {unsafe.Offsetof(r2.QPN), unsafe.Sizeof(r2.QPN)},
		"ib_user_mad_reg_req2.mgmt_class":         {unsafe.Offsetof(r2.MgmtClass), unsafe.Sizeof(r2.MgmtClass)},
		"ib_user_mad_reg_req2.mgmt_class_version": {unsafe.Offsetof(r2.MgmtClassVersion), unsafe.Sizeof(r2.MgmtClassVersion)},
		"ib_user_mad_reg_req2.res":                {unsafe.Offsetof(r2.Res), unsafe.Sizeof(r2.Res)},
		"ib_user_mad_reg_req2.flags":              {unsafe.Offsetof(r2.Flags), unsafe.Sizeof(r2.Flags)},
		"ib_user_mad_reg_req2.method_mask":        {unsafe.Offsetof(r2.MethodMask), unsafe.Sizeof(r2.MethodMask)},
		"ib_user_mad_reg_req2.oui":                {unsafe.Offsetof(r2.OUI), unsafe.Sizeof(r2.OUI)},
		"ib_user_mad_reg_req2.rmpp_version":       {unsafe.Offsetof(r2.RMPPVersion), unsafe.Sizeof(r2.RMPPVersion)},
		"ib_user_mad_reg_req2.reserved":           {unsafe.Offsetof(r2.Reserved), unsafe.Sizeof(r2.Reserved)},
	}
}

func requireCgo(t *testing.T) {
	t.Helper()
	if !abicheck.Available {
		t.Skip("built without cgo: cannot compare with <rdma/ib_user_mad.h>")
	}
}

func TestABIStructLayout(t *testing.T) {
	requireCgo(t)
	g := goFields()
	seen := 0
	for _, f := range abicheck.Fields() {
		key := f.Struct + "." + f.Name
		gf, ok := g[key]
		if !ok {
			t.Errorf("%s: no Go counterpart", key)
			continue
		}
		seen++
		if gf.off != f.Offset || gf.size != f.Size {
			t.Errorf("%s: Go offset %d size %d, C offset %d size %d", key, gf.off, gf.size, f.Offset, f.Size)
		}
	}
	if seen != len(g) {
		t.Errorf("C reported %d of the %d Go fields", seen, len(g))
	}
	sizes := abicheck.Sizes()
	for name, got := range map[string]uintptr{
		"ib_user_mad_hdr":      unsafe.Sizeof(userMADHdr{}),
		"ib_user_mad_reg_req":  unsafe.Sizeof(regReq{}),
		"ib_user_mad_reg_req2": unsafe.Sizeof(regReq2{}),
		"ib_user_mad":          uintptr(hdrSize), // the data[] flexible array adds nothing
	} {
		if sizes[name] != got {
			t.Errorf("sizeof(struct %s): Go %d, C %d", name, got, sizes[name])
		}
	}
	// The P_Key layout extends the old one by pkey_index + reserved[6].
	if sizes["ib_user_mad_hdr_old"]+8 != sizes["ib_user_mad_hdr"] {
		t.Errorf("old header %d, new %d", sizes["ib_user_mad_hdr_old"], sizes["ib_user_mad_hdr"])
	}
	if abicheck.ABIVersion() != ABIVersion {
		t.Errorf("IB_USER_MAD_ABI_VERSION %d, want %d", abicheck.ABIVersion(), ABIVersion)
	}
}

func TestABIIoctlNumbers(t *testing.T) {
	requireCgo(t)
	c := abicheck.Ioctls()
	for name, got := range map[string]uint{
		"IB_USER_MAD_REGISTER_AGENT":   ioctlRegisterAgent,
		"IB_USER_MAD_UNREGISTER_AGENT": ioctlUnregisterAgent,
		"IB_USER_MAD_ENABLE_PKEY":      ioctlEnablePKey,
		"IB_USER_MAD_REGISTER_AGENT2":  ioctlRegisterAgent2,
	} {
		if c[name] != got {
			t.Errorf("%s: Go %#x, C %#x", name, got, c[name])
		}
	}
}

// The method bitmaps must set the same bits set_bit() would.
func TestMethodMask(t *testing.T) {
	var r2 regReq2
	r2.setMethodMask(MethodSend, MethodGet, 0x41, 0x81)
	if r2.MethodMask[0] != 1<<3|1<<1 || r2.MethodMask[1] != 1<<1 {
		t.Fatalf("reg_req2 mask %#x", r2.MethodMask)
	}
	var r regReq
	r.setMethodMask(MethodSend, 0x41, 0x81)
	if unsafe.Sizeof(uintptr(0)) == 8 {
		lo := binary.NativeEndian.Uint64(r.MethodMask[0:8])
		hi := binary.NativeEndian.Uint64(r.MethodMask[8:16])
		if lo != 1<<3 || hi != 1<<1 {
			t.Fatalf("reg_req mask %#x %#x", lo, hi)
		}
	}
}
