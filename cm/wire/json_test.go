package wire_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

func TestJSONForm(t *testing.T) {
	req := &wire.REQ{LocalCommID: 7, LocalQPN: 0x123456, ServiceID: wire.IPServiceID(4791),
		LocalCAGUID: 0x0002C90300AABBCC, PrimaryLocalPortGID: gid("::ffff:10.0.0.1"), SRQ: true,
		PathPacketPayloadMTU: wire.MTU1024}
	req.PrivateData[0], req.PrivateData[2] = 0xAB, 0x01
	var buf [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{TID: 0x100000007}, req))
	var m wire.MAD
	require.NoError(t, wire.DecodeMAD(buf[:], &m))
	j, err := json.Marshal(&m)
	require.NoError(t, err)
	s := string(j)
	for _, frag := range []string{
		`{"type":"REQ","method":3,"mad_status":0,"class_specific":0,"tid":"0x0000000100000007","attribute_modifier":0,"local_comm_id":7,`,
		`"service_id":"0x00000000010612b7"`, `"local_ca_guid":"0x0002c90300aabbcc"`,
		`"local_qpn":1193046`, `"srq":true`, `"path_packet_payload_mtu":3`,
		`"primary_local_port_gid":"::ffff:10.0.0.1"`, `"primary_remote_port_gid":"::"`,
		`"remote_cm_response_timeout":0`, `"primary_local_port_lid":0`,
		`"private_data":"ab0001"}`,
	} {
		require.Contains(t, s, frag)
	}
	// Keys appear in wire order, one per field, after the header keys.
	var keys []string
	dec := json.NewDecoder(strings.NewReader(s))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var skip json.RawMessage
		require.NoError(t, dec.Decode(&skip))
	}
	want := []string{"type", "method", "mad_status", "class_specific", "tid", "attribute_modifier"}
	for _, f := range wire.Layout(wire.AttrREQ) {
		want = append(want, f.JSON)
	}
	require.Equal(t, want, keys)
}

func TestJSONNames(t *testing.T) {
	// Spot-check the public names against the macro rule.
	names := map[wire.AttrID][]string{
		wire.AttrREQ:     {"local_comm_id", "primary_local_port_lid", "remote_cm_response_timeout", "private_data", "local_q_key", "sap_supported", "extended_transport_type", "vendor_id"},
		wire.AttrREJ:     {"ari", "message_rejected", "rejected_info_length", "reason"},
		wire.AttrMRA:     {"message_mraed", "service_timeout"},
		wire.AttrREP:     {"vendor_id_h", "vendor_id_m", "vendor_id_l", "local_ee_context_number", "failover_accepted"},
		wire.AttrDREQ:    {"remote_qpn_eecn"},
		wire.AttrAPR:     {"ar_status", "additional_information_length", "additional_information"},
		wire.AttrSIDRReq: {"requestid", "serviceid", "partition_key"},
		wire.AttrSIDRRep: {"status", "qpn", "q_key", "serviceid"},
		wire.AttrLAP:     {"alternate_local_ack_timeout", "remote_qpn_eecn"},
	}
	for a, ns := range names {
		have := map[string]bool{}
		for _, f := range wire.Layout(a) {
			have[f.JSON] = true
			if strings.HasPrefix(f.Macro, "CM_") {
				prefix := "CM_" + strings.ReplaceAll(a.String(), "-", "_") + "_"
				require.Equal(t, strings.ToLower(strings.TrimPrefix(f.Macro, prefix)), f.JSON)
			}
		}
		for _, n := range ns {
			require.True(t, have[n], "%s has no %q", a, n)
		}
	}
}

func TestJSONInput(t *testing.T) {
	var m wire.MAD
	// Minimal input: defaults for the header, zero fields, hex integers accepted.
	require.NoError(t, json.Unmarshal([]byte(`{"type":"DREQ","remote_qpn_eecn":"0xFFFFFF","tid":12,"private_data":"01"}`), &m))
	require.Equal(t, wire.AttrDREQ, m.AttrID)
	require.Equal(t, uint8(wire.MethodSend), m.Method)
	require.Equal(t, uint64(12), m.TID)
	require.Equal(t, uint32(0xFFFFFF), m.DREQ.RemoteQPNEECN)
	require.Equal(t, byte(1), m.DREQ.PrivateData[0])

	// A second decode into the same MAD resets the message.
	require.NoError(t, json.Unmarshal([]byte(`{"type":"DREQ"}`), &m))
	require.Equal(t, wire.DREQ{}, m.DREQ)
	require.Equal(t, uint64(0), m.TID)

	require.NoError(t, json.Unmarshal([]byte(`{"type":"ClassPortInfo","redirect_gid":"10.1.2.3"}`), &m))
	require.Equal(t, uint8(wire.MethodGet), m.Method)
	require.Equal(t, gid("::ffff:10.1.2.3"), m.ClassPortInfo.RedirectGID)

	bad := []struct {
		in   string
		want error
	}{
		{`{"type":"REQ","local_qpn":16777216}`, wire.ErrFieldRange},
		{`{"type":"REQ","local_qpn":"0x1000000"}`, wire.ErrFieldRange},
		{`{"type":"REQ","retry_count":8}`, wire.ErrFieldRange},
		{`{"type":"REQ","tid":"0x10000000000000000"}`, wire.ErrFieldRange},
		{`{"type":"REQ","method":256}`, wire.ErrFieldRange},
		{`{"type":"REQ","local_qpn":-1}`, wire.ErrSyntax},
		{`{"type":"REQ","local_qpn":1.5}`, wire.ErrSyntax},
		{`{"type":"REQ","local_qpn":"12"}`, wire.ErrSyntax},
		{`{"type":"REQ","srq":1}`, wire.ErrSyntax},
		{`{"type":"REQ","primary_local_port_gid":"fe80::1%eth0"}`, wire.ErrSyntax},
		{`{"type":"REQ","private_data":"abc"}`, wire.ErrSyntax},
		{`{"type":"REQ","private_data":"zz"}`, wire.ErrSyntax},
		{`{"type":"REQ","private_data":"` + strings.Repeat("00", 93) + `"}`, wire.ErrPrivateDataTooLong},
		{`{"type":"REJ","ari":"` + strings.Repeat("00", 73) + `"}`, wire.ErrPrivateDataTooLong},
		{`{"type":"REQ","no_such_field":1}`, wire.ErrSyntax},
		{`{"type":"REQ","local_qpn":1,"local_qpn":2}`, wire.ErrSyntax},
		{`{"type":"NOPE"}`, wire.ErrUnknownAttribute},
		{`{"local_qpn":1}`, wire.ErrSyntax},
		{`[1]`, wire.ErrSyntax},
	}
	for _, c := range bad {
		var m wire.MAD
		err := m.UnmarshalJSON([]byte(c.in))
		require.ErrorIs(t, err, c.want, c.in)
	}
	var fe *wire.FieldError
	err := m.UnmarshalJSON([]byte(`{"type":"REQ","local_qpn":16777216}`))
	require.ErrorAs(t, err, &fe)
	require.Equal(t, "local_qpn", fe.Field)

	m.AttrID = 0x55
	_, err = json.Marshal(&m)
	require.ErrorIs(t, err, wire.ErrUnknownAttribute)
}
