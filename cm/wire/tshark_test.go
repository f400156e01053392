package wire_test

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cm/wire/pcap"
)

// The Wireshark InfiniBand dissector (checked with 4.0.17) decodes these six
// CM messages; MRA, LAP, APR and SIDR are not dissected. Field names come
// from `tshark -G fields | grep infiniband`.
var tsharkFields = []string{
	"frame.number", "ip.checksum.status", "ipv6.src",
	"infiniband.bth.opcode", "infiniband.bth.destqp", "infiniband.bth.p_key",
	"infiniband.deth.q_key", "infiniband.deth.srcqp",
	"infiniband.mad.baseversion", "infiniband.mad.mgmtclass", "infiniband.mad.classversion",
	"infiniband.mad.method", "infiniband.mad.status", "infiniband.mad.classspecific",
	"infiniband.mad.transactionid", "infiniband.mad.attributeid", "infiniband.mad.attributemodifier",
	// REQ ("infiniband.cm.req" is the dissector's name for the local comm ID)
	"infiniband.cm.req", "infiniband.cm.req.serviceid", "infiniband.cm.req.localcaguid",
	"infiniband.cm.req.localqkey", "infiniband.cm.req.localqpn", "infiniband.cm.req.responderres",
	"infiniband.cm.req.localeecn", "infiniband.cm.req.initdepth", "infiniband.cm.req.remoteeecn",
	"infiniband.cm.req.remoteresptout", "infiniband.cm.req.transpsvctype", "infiniband.cm.req.e2eflowctrl",
	"infiniband.cm.req.startpsn", "infiniband.cm.req.localresptout", "infiniband.cm.req.retrcount",
	"infiniband.cm.req.pkey", "infiniband.cm.req.pppmtu", "infiniband.cm.req.rdcexist",
	"infiniband.cm.req.rnrretrcount", "infiniband.cm.req.maxcmretr", "infiniband.cm.req.srq",
	"infiniband.cm.req.ext_transport",
	"infiniband.cm.req.prim_locallid", "infiniband.cm.req.prim_remotelid",
	"infiniband.cm.req.prim_localgid", "infiniband.cm.req.prim_remotegid",
	"infiniband.cm.req.prim_localgid_ipv4", "infiniband.cm.req.prim_remotegid_ipv4",
	"infiniband.cm.req.prim_flowlabel", "infiniband.cm.req.prim_pktrate",
	"infiniband.cm.req.prim_tfcclass", "infiniband.cm.req.prim_hoplim", "infiniband.cm.req.prim_sl",
	"infiniband.cm.req.prim_subnetlocal", "infiniband.cm.req.prim_localacktout",
	"infiniband.cm.req.alt_locallid", "infiniband.cm.req.alt_remotelid",
	"infiniband.cm.req.alt_localgid", "infiniband.cm.req.alt_remotegid",
	"infiniband.cm.req.alt_flowlabel", "infiniband.cm.req.alt_pktrate",
	"infiniband.cm.req.alt_tfcclass", "infiniband.cm.req.alt_hoplim", "infiniband.cm.req.alt_sl",
	"infiniband.cm.req.alt_subnetlocal", "infiniband.cm.req.alt_localacktout",
	"infiniband.cm.req.private",
	"infiniband.cm.req.serviceid.dport", "infiniband.cm.req.ip_cm.ipv", "infiniband.cm.req.ip_cm.sport",
	"infiniband.cm.req.ip_cm.sip4", "infiniband.cm.req.ip_cm.dip4",
	"infiniband.cm.req.ip_cm.sip6", "infiniband.cm.req.ip_cm.dip6", "infiniband.cm.req.ip_cm.private",
	// REP ("infiniband.cm.rep" is the local comm ID)
	"infiniband.cm.rep", "infiniband.cm.rep.remotecommid", "infiniband.cm.rep.localqkey",
	"infiniband.cm.rep.localqpn", "infiniband.cm.rep.localeecn", "infiniband.cm.rep.startpsn",
	"infiniband.cm.rep.respres", "infiniband.cm.rep.initdepth", "infiniband.cm.rep.tgtackdelay",
	"infiniband.cm.rep.failoveracc", "infiniband.cm.rep.e2eflowctrl", "infiniband.cm.rep.rnrretrcount",
	"infiniband.cm.rep.srq", "infiniband.cm.rep.localcaguid", "infiniband.cm.rep.private",
	// RTU
	"infiniband.cm.rtu.localcommid", "infiniband.cm.rtu.remotecommid", "infiniband.cm.rtu.private",
	// REJ
	"infiniband.cm.rej.localcommid", "infiniband.cm.rej.remotecommid", "infiniband.cm.rej.msgrej",
	"infiniband.cm.rej.rejinfolen", "infiniband.cm.rej.reason", "infiniband.cm.rej.ari",
	"infiniband.cm.rej.private",
	// DREQ (its remote QPN field is registered under the REQ prefix)
	"infiniband.cm.dreq.localcommid", "infiniband.cm.dreq.remotecommid",
	"infiniband.cm.req.remoteqpneecn", "infiniband.cm.dreq.private",
	// DREP
	"infiniband.cm.drsp.localcommid", "infiniband.cm.drsp.remotecommid", "infiniband.cm.drsp.private",
}

type sentMAD struct {
	h    wire.Header
	msg  wire.Message
	v6   bool
	ipcm *wire.IPCMHeader
}

// TestTsharkCrossCheck writes random REQ, REP, RTU, REJ, DREQ and DREP MADs
// to a pcap, lets tshark dissect them, and compares every field tshark
// reports with what was encoded: frame, BTH/DETH, MAD header and CM fields.
func TestTsharkCrossCheck(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tshark is required when CI=true (Debian: apt-get install tshark)")
		}
		t.Skip("tshark not installed")
	}

	const n = 240
	seed := uint64(0x1bc4)
	rng := rand.New(rand.NewPCG(seed, 7))
	types := []wire.AttrID{wire.AttrREQ, wire.AttrREP, wire.AttrRTU, wire.AttrREJ, wire.AttrDREQ, wire.AttrDREP}
	dir := t.TempDir()
	path := filepath.Join(dir, "cm.pcap")
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := pcap.NewWriter(f)
	require.NoError(t, err)
	v6src, v6dst := netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")

	var sent []sentMAD
	for i := 0; i < n; i++ {
		a := types[i%len(types)]
		s := sentMAD{
			h: wire.Header{Method: wire.MethodSend, Status: uint16(rng.Uint32()), ClassSpecific: uint16(rng.Uint32()),
				TID: rng.Uint64(), AttrMod: rng.Uint32()},
			msg: randomMessage(rng, a),
			// Over IPv4, Wireshark shows only the last 4 bytes of the REQ primary GIDs.
			v6: (i/len(types))%2 == 1,
		}
		if req, ok := s.msg.(*wire.REQ); ok {
			if i%4 == 0 && rng.IntN(2) == 0 { // RDMA IP CM service: tshark parses the private-data header
				ip := &wire.IPCMHeader{IPVersion: 4, SrcPort: uint16(rng.Uint32()),
					SrcIP: netip.AddrFrom4([4]byte{10, byte(rng.Uint32()), 1, 2}),
					DstIP: netip.AddrFrom4([4]byte{10, 3, byte(rng.Uint32()), 4})}
				if i%8 == 0 {
					ip = &wire.IPCMHeader{IPVersion: 6, SrcPort: uint16(rng.Uint32()), SrcIP: v6src,
						DstIP: netip.AddrFrom16([16]byte{0xfd, 15: byte(i)})}
				}
				req.ServiceID = wire.IPServiceID(uint16(20000 + rng.IntN(20000)))
				require.NoError(t, ip.Encode(req.PrivateData[:]))
				s.ipcm = ip
			}
		}
		var buf [wire.MADSize]byte
		require.NoError(t, wire.EncodeMAD(&buf, s.h, s.msg))
		s.h.AttrID = a
		fr := pcap.Frame{}
		if s.v6 {
			fr.SrcIP, fr.DstIP = v6src, v6dst
		}
		require.NoError(t, w.WriteFrame(fr, buf[:]))
		sent = append(sent, s)
	}
	require.NoError(t, f.Close())

	args := []string{"-r", path, "-n", "-o", "ip.check_checksum:TRUE", "-T", "fields",
		"-E", "separator=/t", "-E", "occurrence=a", "-E", "aggregator=;"}
	for _, fld := range tsharkFields {
		args = append(args, "-e", fld)
	}
	cmd := exec.Command(tshark, args...)
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_CONFIG_HOME="+dir) // no personal preferences
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "tshark: %s", stderr.String())
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	require.Len(t, lines, n, "one line per frame")

	c := &tsharkCheck{t: t}
	for i, line := range lines {
		vals := strings.Split(line, "\t")
		require.Len(t, vals, len(tsharkFields), "frame %d", i+1)
		c.row = map[string]string{}
		for j, fld := range tsharkFields {
			c.row[fld] = vals[j]
		}
		c.frame = i + 1
		c.compareFrame(&sent[i])
	}
	t.Logf("compared %d field values in %d frames (seed %#x)", c.compared, n, seed)
	if len(c.bad) > 0 {
		t.Fatalf("%d mismatches between encoded MADs and tshark:\n%s", len(c.bad), strings.Join(c.bad[:min(len(c.bad), 40)], "\n"))
	}
	for _, fld := range tsharkFields[1:] {
		if fld != "ip.checksum.status" && fld != "ipv6.src" && !c.seen[fld] {
			t.Errorf("tshark never reported %s", fld)
		}
	}
}

type tsharkCheck struct {
	t        *testing.T
	frame    int
	row      map[string]string
	bad      []string
	compared int
	seen     map[string]bool
}

func (c *tsharkCheck) fail(field, format string, args ...any) {
	c.bad = append(c.bad, fmt.Sprintf("frame %d %s: ", c.frame, field)+fmt.Sprintf(format, args...))
}

func (c *tsharkCheck) get(field string) (string, bool) {
	v, ok := c.row[field]
	if !ok {
		c.t.Fatalf("field %s not requested", field)
	}
	if v == "" {
		c.fail(field, "not reported")
		return "", false
	}
	if c.seen == nil {
		c.seen = map[string]bool{}
	}
	c.seen[field] = true
	c.compared++
	return v, true
}

// num compares a numeric field (tshark prints decimal or 0x-hex).
func (c *tsharkCheck) num(field string, want uint64, alsoOK ...uint64) {
	v, ok := c.get(field)
	if !ok {
		return
	}
	got, err := strconv.ParseUint(v, 0, 64)
	if err != nil {
		if v == "True" || v == "False" {
			got = map[string]uint64{"True": 1, "False": 0}[v]
		} else {
			c.fail(field, "unparsable %q", v)
			return
		}
	}
	if got == want {
		return
	}
	for _, w := range alsoOK {
		if got == w {
			return
		}
	}
	c.fail(field, "tshark %#x, encoded %#x", got, want)
}

func (c *tsharkCheck) flag(field string, want bool) {
	w := uint64(0)
	if want {
		w = 1
	}
	c.num(field, w)
}

func (c *tsharkCheck) bytes(field string, want []byte) {
	if v, ok := c.get(field); ok && v != hex.EncodeToString(want) {
		c.fail(field, "tshark %s, encoded %x", v, want)
	}
}

func (c *tsharkCheck) addr(field string, want netip.Addr) {
	v, ok := c.get(field)
	if !ok {
		return
	}
	got, err := netip.ParseAddr(v)
	if err != nil || got != want {
		c.fail(field, "tshark %s, encoded %s", v, want)
	}
}

func (c *tsharkCheck) absent(field string) {
	if v := c.row[field]; v != "" {
		c.fail(field, "unexpected value %q", v)
	}
}

func (c *tsharkCheck) compareFrame(s *sentMAD) {
	if s.v6 {
		c.addr("ipv6.src", netip.MustParseAddr("fd00::1"))
	} else {
		c.num("ip.checksum.status", 1) // 1 = good: our IPv4 header checksum verifies
	}
	c.num("infiniband.bth.opcode", pcap.OpUDSendOnly)
	c.num("infiniband.bth.destqp", 1)
	c.num("infiniband.bth.p_key", 0xFFFF)
	c.num("infiniband.deth.q_key", 0x80010000)
	c.num("infiniband.deth.srcqp", 1)
	h := s.h
	c.num("infiniband.mad.baseversion", 1)
	c.num("infiniband.mad.mgmtclass", 7)
	c.num("infiniband.mad.classversion", 2)
	c.num("infiniband.mad.method", uint64(h.Method))
	c.num("infiniband.mad.status", uint64(h.Status))
	c.num("infiniband.mad.classspecific", uint64(h.ClassSpecific))
	c.num("infiniband.mad.transactionid", h.TID)
	c.num("infiniband.mad.attributeid", uint64(h.AttrID))
	c.num("infiniband.mad.attributemodifier", uint64(h.AttrMod))

	switch m := s.msg.(type) {
	case *wire.REQ:
		c.compareREQ(m, s)
	case *wire.REP:
		c.num("infiniband.cm.rep", uint64(m.LocalCommID))
		c.num("infiniband.cm.rep.remotecommid", uint64(m.RemoteCommID))
		c.num("infiniband.cm.rep.localqkey", uint64(m.LocalQKey))
		c.num("infiniband.cm.rep.localqpn", uint64(m.LocalQPN))
		c.num("infiniband.cm.rep.localeecn", uint64(m.LocalEEContextNumber))
		c.num("infiniband.cm.rep.startpsn", uint64(m.StartingPSN))
		c.num("infiniband.cm.rep.respres", uint64(m.ResponderResources))
		c.num("infiniband.cm.rep.initdepth", uint64(m.InitiatorDepth))
		c.num("infiniband.cm.rep.tgtackdelay", uint64(m.TargetAckDelay))
		c.num("infiniband.cm.rep.failoveracc", uint64(m.FailoverAccepted))
		c.flag("infiniband.cm.rep.e2eflowctrl", m.EndToEndFlowControl)
		c.num("infiniband.cm.rep.rnrretrcount", uint64(m.RNRRetryCount))
		c.flag("infiniband.cm.rep.srq", m.SRQ)
		c.num("infiniband.cm.rep.localcaguid", m.LocalCAGUID)
		c.bytes("infiniband.cm.rep.private", m.PrivateData[:])
	case *wire.RTU:
		c.num("infiniband.cm.rtu.localcommid", uint64(m.LocalCommID))
		c.num("infiniband.cm.rtu.remotecommid", uint64(m.RemoteCommID))
		c.bytes("infiniband.cm.rtu.private", m.PrivateData[:])
	case *wire.REJ:
		c.num("infiniband.cm.rej.localcommid", uint64(m.LocalCommID))
		c.num("infiniband.cm.rej.remotecommid", uint64(m.RemoteCommID))
		c.num("infiniband.cm.rej.msgrej", uint64(m.MessageRejected))
		c.num("infiniband.cm.rej.rejinfolen", uint64(m.RejectedInfoLength))
		c.num("infiniband.cm.rej.reason", uint64(m.Reason))
		c.bytes("infiniband.cm.rej.ari", m.ARI[:])
		c.bytes("infiniband.cm.rej.private", m.PrivateData[:])
	case *wire.DREQ:
		c.num("infiniband.cm.dreq.localcommid", uint64(m.LocalCommID))
		c.num("infiniband.cm.dreq.remotecommid", uint64(m.RemoteCommID))
		c.num("infiniband.cm.req.remoteqpneecn", uint64(m.RemoteQPNEECN))
		c.bytes("infiniband.cm.dreq.private", m.PrivateData[:])
	case *wire.DREP:
		c.num("infiniband.cm.drsp.localcommid", uint64(m.LocalCommID))
		c.num("infiniband.cm.drsp.remotecommid", uint64(m.RemoteCommID))
		c.bytes("infiniband.cm.drsp.private", m.PrivateData[:])
	default:
		c.t.Fatalf("unexpected %T", m)
	}
}

func (c *tsharkCheck) compareREQ(m *wire.REQ, s *sentMAD) {
	c.num("infiniband.cm.req", uint64(m.LocalCommID))
	c.num("infiniband.cm.req.serviceid", m.ServiceID)
	c.num("infiniband.cm.req.localcaguid", m.LocalCAGUID)
	c.num("infiniband.cm.req.localqkey", uint64(m.LocalQKey))
	c.num("infiniband.cm.req.localqpn", uint64(m.LocalQPN))
	c.num("infiniband.cm.req.responderres", uint64(m.ResponderResources))
	c.num("infiniband.cm.req.localeecn", uint64(m.LocalEECN))
	c.num("infiniband.cm.req.initdepth", uint64(m.InitiatorDepth))
	c.num("infiniband.cm.req.remoteeecn", uint64(m.RemoteEECN))
	c.num("infiniband.cm.req.remoteresptout", uint64(m.RemoteCMResponseTimeout))
	c.num("infiniband.cm.req.transpsvctype", uint64(m.TransportServiceType))
	c.flag("infiniband.cm.req.e2eflowctrl", m.EndToEndFlowControl)
	c.num("infiniband.cm.req.startpsn", uint64(m.StartingPSN))
	c.num("infiniband.cm.req.localresptout", uint64(m.LocalCMResponseTimeout))
	c.num("infiniband.cm.req.retrcount", uint64(m.RetryCount))
	c.num("infiniband.cm.req.pkey", uint64(m.PartitionKey))
	c.num("infiniband.cm.req.pppmtu", uint64(m.PathPacketPayloadMTU))
	c.flag("infiniband.cm.req.rdcexist", m.RDCExists)
	c.num("infiniband.cm.req.rnrretrcount", uint64(m.RNRRetryCount))
	c.num("infiniband.cm.req.maxcmretr", uint64(m.MaxCMRetries))
	c.flag("infiniband.cm.req.srq", m.SRQ)
	c.num("infiniband.cm.req.ext_transport", uint64(m.ExtendedTransportType))
	c.num("infiniband.cm.req.prim_locallid", uint64(m.PrimaryLocalPortLID))
	c.num("infiniband.cm.req.prim_remotelid", uint64(m.PrimaryRemotePortLID))
	if s.v6 {
		c.addr("infiniband.cm.req.prim_localgid", m.PrimaryLocalPortGID.Addr())
		c.addr("infiniband.cm.req.prim_remotegid", m.PrimaryRemotePortGID.Addr())
	} else {
		// Over IPv4 the dissector shows only bytes 12-15 of each primary GID.
		c.addr("infiniband.cm.req.prim_localgid_ipv4", netip.AddrFrom4([4]byte(m.PrimaryLocalPortGID[12:])))
		c.addr("infiniband.cm.req.prim_remotegid_ipv4", netip.AddrFrom4([4]byte(m.PrimaryRemotePortGID[12:])))
	}
	// Wireshark 4.0 misreads the 20-bit flow labels (3 bytes under a 32-bit
	// mask: it shows only their top 12 bits) and takes the packet rate from
	// the first flow-label byte instead of payload byte 91/135. Accept the
	// correct value or exactly that misreading of our bytes.
	c.num("infiniband.cm.req.prim_flowlabel", uint64(m.PrimaryFlowLabel), uint64(m.PrimaryFlowLabel>>8))
	c.num("infiniband.cm.req.prim_pktrate", uint64(m.PrimaryPacketRate), uint64(m.PrimaryFlowLabel>>12&0x3F))
	c.num("infiniband.cm.req.prim_tfcclass", uint64(m.PrimaryTrafficClass))
	c.num("infiniband.cm.req.prim_hoplim", uint64(m.PrimaryHopLimit))
	c.num("infiniband.cm.req.prim_sl", uint64(m.PrimarySL))
	c.flag("infiniband.cm.req.prim_subnetlocal", m.PrimarySubnetLocal)
	c.num("infiniband.cm.req.prim_localacktout", uint64(m.PrimaryLocalAckTimeout))
	c.num("infiniband.cm.req.alt_locallid", uint64(m.AlternateLocalPortLID))
	c.num("infiniband.cm.req.alt_remotelid", uint64(m.AlternateRemotePortLID))
	c.bytes("infiniband.cm.req.alt_localgid", m.AlternateLocalPortGID[:])
	c.bytes("infiniband.cm.req.alt_remotegid", m.AlternateRemotePortGID[:])
	c.num("infiniband.cm.req.alt_flowlabel", uint64(m.AlternateFlowLabel), uint64(m.AlternateFlowLabel>>8))
	c.num("infiniband.cm.req.alt_pktrate", uint64(m.AlternatePacketRate), uint64(m.AlternateFlowLabel>>12&0x3F))
	c.num("infiniband.cm.req.alt_tfcclass", uint64(m.AlternateTrafficClass))
	c.num("infiniband.cm.req.alt_hoplim", uint64(m.AlternateHopLimit))
	c.num("infiniband.cm.req.alt_sl", uint64(m.AlternateSL))
	c.flag("infiniband.cm.req.alt_subnetlocal", m.AlternateSubnetLocal)
	c.num("infiniband.cm.req.alt_localacktout", uint64(m.AlternateLocalAckTimeout))
	if s.ipcm == nil {
		c.bytes("infiniband.cm.req.private", m.PrivateData[:])
		c.absent("infiniband.cm.req.ip_cm.ipv")
		return
	}
	port, _ := wire.IPServicePort(m.ServiceID)
	c.num("infiniband.cm.req.serviceid.dport", uint64(port))
	c.num("infiniband.cm.req.ip_cm.ipv", uint64(s.ipcm.IPVersion))
	c.num("infiniband.cm.req.ip_cm.sport", uint64(s.ipcm.SrcPort))
	if s.ipcm.IPVersion == 4 {
		c.addr("infiniband.cm.req.ip_cm.sip4", s.ipcm.SrcIP)
		c.addr("infiniband.cm.req.ip_cm.dip4", s.ipcm.DstIP)
	} else {
		c.addr("infiniband.cm.req.ip_cm.sip6", s.ipcm.SrcIP)
		c.addr("infiniband.cm.req.ip_cm.dip6", s.ipcm.DstIP)
	}
	c.bytes("infiniband.cm.req.ip_cm.private", m.PrivateData[wire.IPCMHeaderSize:])
}
