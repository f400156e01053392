package wire_test

import (
	"bytes"
	"errors"
	"reflect"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/wire"
)

func TestQPNOutOfRange(t *testing.T) {
	req := &wire.REQ{LocalQPN: 1 << 24}
	var b [wire.DataSize]byte
	err := req.Encode(b[:])
	require.Error(t, err)
	require.True(t, errors.Is(err, wire.ErrFieldRange), "%v", err)
	var fe *wire.FieldError
	require.True(t, errors.As(err, &fe))
	assert.Equal(t, "REQ", fe.Msg)
	assert.Equal(t, "LocalQPN", fe.Field)
	assert.Contains(t, err.Error(), "LocalQPN")

	var mad [wire.MADSize]byte
	err = wire.EncodeMAD(&mad, wire.Header{}, req)
	require.ErrorIs(t, err, wire.ErrFieldRange)
	require.Equal(t, [wire.MADSize]byte{}, mad, "a failed EncodeMAD leaves the buffer unchanged")

	req.LocalQPN = 1<<24 - 1
	require.NoError(t, req.Encode(b[:]))
}

// TestEveryNarrowFieldOutOfRange sets each field narrower than its Go type to
// 2^width and expects ErrFieldRange naming that field, with b unchanged.
func TestEveryNarrowFieldOutOfRange(t *testing.T) {
	checked := 0
	for _, a := range allAttrs {
		for _, f := range wire.Layout(a) {
			msg := newMessage(a)
			fv := reflect.ValueOf(msg).Elem().FieldByName(f.Name)
			if fv.Kind() == reflect.Bool || fv.Kind() == reflect.Array || f.Width >= fv.Type().Bits() {
				continue
			}
			fv.SetUint(1 << f.Width)
			b := bytes.Repeat([]byte{0x5A}, wire.DataSize)
			err := msg.Encode(b)
			require.ErrorIs(t, err, wire.ErrFieldRange, "%s.%s", a, f.Name)
			var fe *wire.FieldError
			require.ErrorAs(t, err, &fe)
			require.Equal(t, f.Name, fe.Field)
			require.Equal(t, bytes.Repeat([]byte{0x5A}, wire.DataSize), b, "%s.%s: buffer modified", a, f.Name)

			fv.SetUint(1<<f.Width - 1)
			require.NoError(t, msg.Encode(b), "%s.%s at its maximum", a, f.Name)
			checked++
		}
	}
	require.Equal(t, 47, checked, "narrow integer fields in the table")
}

func TestShortBuffers(t *testing.T) {
	var big [wire.MADSize]byte
	for _, a := range allAttrs {
		n := bodySize(a)
		msg := newMessage(a)
		require.ErrorIs(t, msg.Encode(big[:n-1]), wire.ErrShortBuffer, "%s encode", a)
		require.ErrorIs(t, msg.Decode(big[:n-1]), wire.ErrShortBuffer, "%s decode", a)
		require.NoError(t, msg.Encode(big[:n]))
		require.NoError(t, msg.Decode(big[:n]))
		require.ErrorIs(t, msg.Decode(nil), wire.ErrShortBuffer)
	}
	_, err := wire.DecodeHeader(big[:wire.HeaderSize-1])
	require.ErrorIs(t, err, wire.ErrShortBuffer)
	var h wire.Header
	require.ErrorIs(t, h.Encode(big[:wire.HeaderSize-1]), wire.ErrShortBuffer)

	var good [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&good, wire.Header{}, &wire.RTU{}))
	var m wire.MAD
	for n := 0; n < wire.MADSize; n++ {
		require.ErrorIs(t, wire.DecodeMAD(good[:n], &m), wire.ErrShortBuffer, "len %d", n)
	}
	require.NoError(t, wire.DecodeMAD(good[:], &m))
}

func TestHeaderValidation(t *testing.T) {
	var good [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&good, wire.Header{TID: 1}, &wire.DREP{}))
	h, err := wire.DecodeHeader(good[:])
	require.NoError(t, err)
	require.Equal(t, wire.Header{BaseVersion: 1, MgmtClass: 7, ClassVersion: 2, Method: wire.MethodSend,
		TID: 1, AttrID: wire.AttrDREP}, h)

	cases := []struct {
		name string
		off  int
		val  byte
		want error
	}{
		{"base version 2", 0, 2, wire.ErrBaseVersion},
		{"base version 0", 0, 0, wire.ErrBaseVersion},
		{"class SA", 1, 0x03, wire.ErrMgmtClass},
		{"class version 1", 2, 1, wire.ErrClassVersion},
		{"class version 3", 2, 3, wire.ErrClassVersion},
		{"attribute 0x0000", 17, 0x00, wire.ErrUnknownAttribute},
		{"attribute 0x001B", 17, 0x1B, wire.ErrUnknownAttribute},
		{"attribute 0x0002", 17, 0x02, wire.ErrUnknownAttribute},
	}
	for _, c := range cases {
		b := good
		b[c.off] = c.val
		_, err := wire.DecodeHeader(b[:])
		require.ErrorIs(t, err, c.want, c.name)
		var m wire.MAD
		require.ErrorIs(t, wire.DecodeMAD(b[:], &m), c.want, c.name)
	}
	b := good
	b[16] = 0x01 // attribute 0x0116
	_, err = wire.DecodeHeader(b[:])
	require.ErrorIs(t, err, wire.ErrUnknownAttribute)

	// EncodeMAD refuses a header for another class or version.
	var buf [wire.MADSize]byte
	require.ErrorIs(t, wire.EncodeMAD(&buf, wire.Header{BaseVersion: 2}, &wire.RTU{}), wire.ErrBaseVersion)
	require.ErrorIs(t, wire.EncodeMAD(&buf, wire.Header{MgmtClass: 3}, &wire.RTU{}), wire.ErrMgmtClass)
	require.ErrorIs(t, wire.EncodeMAD(&buf, wire.Header{ClassVersion: 1}, &wire.RTU{}), wire.ErrClassVersion)
	require.ErrorIs(t, wire.EncodeMAD(&buf, wire.Header{}, nil), wire.ErrUnknownAttribute)
	var m wire.MAD
	m.AttrID = 0x99
	require.ErrorIs(t, m.Encode(&buf), wire.ErrUnknownAttribute)
	require.Equal(t, [wire.MADSize]byte{}, buf)
}

func TestEncodeMADDefaults(t *testing.T) {
	var buf [wire.MADSize]byte
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{AttrID: wire.AttrREQ}, &wire.SIDRReq{}))
	require.Equal(t, []byte{1, 7, 2, wire.MethodSend}, buf[:4])
	require.Equal(t, []byte{0x00, 0x17}, buf[16:18], "the attribute ID comes from the message")
	require.NoError(t, wire.EncodeMAD(&buf, wire.Header{}, &wire.ClassPortInfo{}))
	require.Equal(t, byte(wire.MethodGet), buf[3])
	for i := wire.HeaderSize + wire.ClassPortInfoSize; i < wire.MADSize; i++ {
		require.Zero(t, buf[i], "byte %d after ClassPortInfo", i)
	}
}

func TestPrivateDataTooLong(t *testing.T) {
	want := map[wire.AttrID]int{
		wire.AttrREQ: 92, wire.AttrMRA: 222, wire.AttrREJ: 148, wire.AttrREP: 196, wire.AttrRTU: 224,
		wire.AttrDREQ: 220, wire.AttrDREP: 224, wire.AttrLAP: 168, wire.AttrAPR: 148,
		wire.AttrSIDRReq: 216, wire.AttrSIDRRep: 136,
	}
	consts := map[wire.AttrID]int{
		wire.AttrREQ: wire.REQPrivateDataSize, wire.AttrMRA: wire.MRAPrivateDataSize,
		wire.AttrREJ: wire.REJPrivateDataSize, wire.AttrREP: wire.REPPrivateDataSize,
		wire.AttrRTU: wire.RTUPrivateDataSize, wire.AttrDREQ: wire.DREQPrivateDataSize,
		wire.AttrDREP: wire.DREPPrivateDataSize, wire.AttrLAP: wire.LAPPrivateDataSize,
		wire.AttrAPR: wire.APRPrivateDataSize, wire.AttrSIDRReq: wire.SIDRReqPrivateDataSize,
		wire.AttrSIDRRep: wire.SIDRRepPrivateDataSize,
	}
	type setter interface{ SetPrivateData([]byte) error }
	for a, n := range want {
		require.Equal(t, n, consts[a], "%s constant", a)
		msg := newMessage(a)
		pd := reflect.ValueOf(msg).Elem().FieldByName("PrivateData")
		require.Equal(t, n, pd.Len(), "%s array", a)
		s := msg.(setter)
		require.NoError(t, s.SetPrivateData(bytes.Repeat([]byte{1}, n)))
		err := s.SetPrivateData(make([]byte, n+1))
		require.ErrorIs(t, err, wire.ErrPrivateDataTooLong, "%s", a)
		require.NoError(t, s.SetPrivateData([]byte{9}))
		require.Equal(t, byte(9), pd.Index(0).Interface())
		require.Equal(t, byte(0), pd.Index(1).Interface(), "%s: rest zeroed", a)
	}
	require.Equal(t, 72, wire.ARISize)
	require.Equal(t, 72, wire.AdditionalInfoSize)
	var rej wire.REJ
	require.ErrorIs(t, rej.SetARI(make([]byte, 73)), wire.ErrPrivateDataTooLong)
	require.NoError(t, rej.SetARI([]byte{1, 2, 3}))
	require.Equal(t, uint8(3), rej.RejectedInfoLength)
}
