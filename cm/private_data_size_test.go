package cm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
)

// Connect takes an RTU's private data as long as the field, and refuses a
// byte more with ErrBadParam before anything is sent.
func TestRTUPrivateDataFillsItsField(t *testing.T) {
	m := builderManager(PortInfo{})
	p := &ConnectParams{To: transport.Addr{LID: 2}, REQ: wire.REQ{ServiceID: 1, LocalQPN: 0x11}}
	p.RTUPrivateData = make([]byte, wire.RTUPrivateDataSize)
	_, err := m.connectParams(p)
	require.NoError(t, err)
	p.RTUPrivateData = make([]byte, wire.RTUPrivateDataSize+1)
	_, err = m.connectParams(p)
	require.ErrorIs(t, err, ErrBadParam)
}
