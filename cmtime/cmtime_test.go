package cmtime_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/cmtime"
	"github.com/ibcm/ibcm/internal/memqp"
)

// What Write prints, Parse reads back; and a table of rdma-core's cmtime,
// whose figures run into each other when wider than their column.
func TestTableRoundTrip(t *testing.T) {
	tab := cmtime.Table{{Step: "create id"}, {Step: "connect", TotalMS: 12.34, MaxMS: 10.5, MinUS: 812.25, PerConnUS: 123.4}}
	var b strings.Builder
	require.NoError(t, tab.Write(&b))
	require.Equal(t, cmtime.Header+"\n"+
		"create id    :        0.00       0.00       0.00       0.00\n"+
		"connect      :       12.34      10.50     812.25     123.40\n", b.String())
	got, err := cmtime.Parse(strings.NewReader("noise\n" + b.String() + "IBCM-CMTIME conns=1\n"))
	require.NoError(t, err)
	require.Equal(t, tab, got)
	r, ok := cmtime.ParseRow("disconnect   :  123456789.0012345678.00       1.00       2.00")
	require.True(t, ok)
	require.Equal(t, [4]float64{123456789.00, 12345678.00, 1, 2}, r.Figures())
	_, ok = cmtime.ParseRow("connect 1: REJ")
	require.False(t, ok)
	_, ok = cmtime.ParseRow("bogus step   :       0.00       0.00       0.00       0.00")
	require.False(t, ok, "not a step of cmtime's")
	_, ok = cmtime.ParseRow("bind addr    :       0.00       0.00       0.00       0.00")
	require.True(t, ok, "newer cmtime's row")
}

func TestTimesTable(t *testing.T) {
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tm := cmtime.NewTimes(2)
	tm.Steps[cmtime.Connect] = cmtime.Span{Start: at(0), End: at(10)}
	tm.Conns[cmtime.Connect][0] = cmtime.Span{Start: at(0), End: at(4)}
	tm.Conns[cmtime.Connect][1] = cmtime.Span{Start: at(1), End: at(9)}
	tab := tm.Table()
	require.Len(t, tab, 7)
	r, ok := tab.Row(cmtime.Connect)
	require.True(t, ok)
	require.Equal(t, cmtime.Row{Step: "connect", TotalMS: 10, MaxMS: 8, MinUS: 4000, PerConnUS: 5000}, r)
	r, _ = tab.Row(cmtime.CreateQP)
	require.Equal(t, cmtime.Row{Step: "create qp"}, r, "a step not timed")
	_, ok = tab.Row("bind addr")
	require.False(t, ok, "ibcm's table is rdma-core 44's")
	require.Equal(t, 10.0, tm.Steps[cmtime.Connect].MS())
}

// A run over the simulated fabric, with QPs from the in-memory device:
// every connection established and disconnected, every QP destroyed.
func TestRun(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{Seed: 1})
	defer fab.Close()
	ea, eb := fab.NewEndpoint(), fab.NewEndpoint()
	a, err := cm.NewManager(ea, cm.ManagerConfig{LocalGUID: 0xa})
	require.NoError(t, err)
	defer a.Close()
	b, err := cm.NewManager(eb, cm.ManagerConfig{LocalGUID: 0xb})
	require.NoError(t, err)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	l, err := b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	defer l.Close()
	go func() {
		for n := uint32(0); ; n++ {
			r, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go func() {
				_, _ = r.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x100 + n, StartingPSN: 7, RNRRetryCount: 7}})
			}()
		}
	}()
	const n = 20
	params := make([]cm.ConnectParams, n)
	for i := range params {
		params[i] = cm.ConnectParams{To: eb.LocalAddr(), REQ: wire.REQ{ServiceID: 0x1000, LocalQPN: uint32(0x200 + i), StartingPSN: 1,
			RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 15, PrimaryLocalAckTimeout: 8,
			PathPacketPayloadMTU: wire.MTU1024, RetryCount: 2}}
	}
	dev := memqp.NewFabric()
	var log strings.Builder
	res, err := cmtime.Run(ctx, cmtime.Config{Manager: a, Params: params, Device: dev.Device(), Log: &log})
	require.NoError(t, err)
	require.Equal(t, n, res.Established, log.String())
	require.Equal(t, n, res.Disconnected)
	require.Zero(t, res.Errors)
	require.NoError(t, res.Err)
	require.Regexp(t, `^creating qps\nconnecting\ndisconnecting\n`+cmtime.Header, log.String())
	tab, err := cmtime.Parse(strings.NewReader(log.String()))
	require.NoError(t, err)
	for _, s := range []string{cmtime.CreateQP, cmtime.Connect, cmtime.Disconnect} {
		r, ok := tab.Row(s)
		require.True(t, ok, s)
		require.Greater(t, r.TotalMS, 0.0, s)
	}
	require.Zero(t, dev.QPs(), "every QP destroyed after TimeWait")
}
