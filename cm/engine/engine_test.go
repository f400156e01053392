package engine

import (
	"testing"

	"github.com/ibcm/ibcm/cm/wire"
	"github.com/stretchr/testify/require"
)

func TestEngineConnectDisconnect(t *testing.T) {
	a := newTestNode(t, 0xa, 1, Config{})
	b := newTestNode(t, 0xb, 2, Config{})
	lid, err := b.e.Listen(0, 0x1000, ExactMask)
	require.NoError(t, err)
	p := testREQ(0x1000, 0x11)
	p.To = b.addr
	cid, err := a.e.Connect(0, p)
	require.NoError(t, err)
	notes := pump(t, a, b)
	require.Equal(t, "REQReceived", noticeList(notes[b]))
	req := notes[b][0]
	require.Equal(t, lid, req.Listen)
	require.Equal(t, uint32(0x11), req.Msg.REQ.LocalQPN)
	require.NoError(t, b.e.Accept(0, req.ID, &wire.REP{LocalQPN: 0x22, StartingPSN: 5}))
	notes = pump(t, a, b)
	require.Equal(t, "REPReceived", noticeList(notes[a]))
	require.NoError(t, a.e.SendRTU(0, cid, nil))
	notes = pump(t, a, b)
	require.Equal(t, "Established", noticeList(notes[a]))
	require.Equal(t, "Established", noticeList(notes[b]))
	require.Equal(t, StateEstablished, a.e.State(cid))
	require.Equal(t, StateEstablished, b.e.State(req.ID))
	require.NoError(t, a.e.Disconnect(0, cid, nil))
	notes = pump(t, a, b)
	require.Equal(t, "DREQReceived", noticeList(notes[b]))
	require.NoError(t, b.e.SendDREP(0, req.ID, nil))
	notes = pump(t, a, b)
	require.Equal(t, "Disconnected", noticeList(notes[a]))
	require.Equal(t, StateTimeWait, a.e.State(cid))
	require.Equal(t, StateTimeWait, b.e.State(req.ID))
	require.Equal(t, 0, len(a.e.remoteQPN))
	d, ok := a.e.Deadline()
	require.True(t, ok)
	a.e.Tick(d)
	b.e.Tick(d)
	notes = pump(t, a, b)
	require.Equal(t, "TimeWaitExit", noticeList(notes[a]))
	require.Equal(t, 0, a.e.NumIDs())
	require.Equal(t, 1, b.e.NumIDs()) // the listen
}
