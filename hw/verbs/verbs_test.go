package verbs_test

import (
	"context"
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/qpattr"
	"github.com/ibcm/ibcm/hw/verbs"
)

// Objects that were never opened (zero values, nil pointers) answer every
// call with ErrClosed, and Close is a no-op: a bad call never panics.
func TestUnopenedObjectsReportClosed(t *testing.T) {
	ctx := context.Background()
	var d *verbs.Device
	require.NoError(t, d.Close())
	require.Zero(t, d.Live())
	_, err := d.Attr()
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.Port(1)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.GIDs(1)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.PKeys(1)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.PortSnapshot(1)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.AllocPD()
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.NewCompChannel()
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.NewCQ(1, nil)
	require.ErrorIs(t, err, verbs.ErrClosed)
	_, err = d.WaitAsyncEvent(ctx)
	require.ErrorIs(t, err, verbs.ErrClosed)

	for _, pd := range []*verbs.PD{nil, {}} {
		require.NoError(t, pd.Close())
		_, err = pd.AllocMR(4096, qpattr.LocalWrite)
		require.ErrorIs(t, err, verbs.ErrClosed)
		_, err = pd.NewQP(verbs.QPConfig{Type: verbs.RC})
		require.ErrorIs(t, err, verbs.ErrClosed)
		_, err = pd.NewAH(qpattr.AH{})
		require.ErrorIs(t, err, verbs.ErrClosed)
	}
	for _, m := range []*verbs.MR{nil, {}} {
		require.NoError(t, m.Close())
		require.Nil(t, m.Bytes())
	}
	for _, ch := range []*verbs.CompChannel{nil, {}} {
		require.NoError(t, ch.Close())
		_, err = ch.Wait(ctx)
		require.ErrorIs(t, err, verbs.ErrClosed)
	}
	for _, cq := range []*verbs.CQ{nil, {}} {
		require.NoError(t, cq.Close())
		_, err = cq.Poll(make([]verbs.WC, 1))
		require.ErrorIs(t, err, verbs.ErrClosed)
		_, err = cq.Await(ctx, make([]verbs.WC, 1))
		require.ErrorIs(t, err, verbs.ErrClosed)
		require.ErrorIs(t, cq.RequestNotify(false), verbs.ErrClosed)
	}
	for _, q := range []*verbs.QP{nil, {}} {
		require.NoError(t, q.Close())
		require.ErrorIs(t, q.Modify(qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState}), verbs.ErrClosed)
		_, err = q.Query()
		require.ErrorIs(t, err, verbs.ErrClosed)
		_, err = q.State()
		require.ErrorIs(t, err, verbs.ErrClosed)
		require.ErrorIs(t, q.PostSend(verbs.SendWR{Op: verbs.OpSend}), verbs.ErrClosed)
		require.ErrorIs(t, q.PostRecv(verbs.RecvWR{}), verbs.ErrClosed)
	}
	for _, ah := range []*verbs.AH{nil, {}} {
		require.NoError(t, ah.Close())
	}
}

// A mask naming fields qpattr.Attr has no room for is refused before any
// call, as ErrInvalid and as EINVAL.
func TestModifyRefusesMaskBitsAttrDoesNotCarry(t *testing.T) {
	for _, m := range []qpattr.Mask{qpattr.MaskCurState, qpattr.MaskEnSQDAsync, qpattr.MaskCap, 1 << 25} {
		err := (&verbs.QP{}).Modify(qpattr.Attr{State: qpattr.Init, Mask: qpattr.MaskState | m})
		require.ErrorIs(t, err, verbs.ErrInvalid, "mask %v", m)
		require.ErrorIs(t, err, syscall.EINVAL, "mask %v", m)
		require.Contains(t, err.Error(), (m).String())
	}
}

func TestAwaitNeedsRoom(t *testing.T) {
	_, err := (&verbs.CQ{}).Await(context.Background(), nil)
	require.ErrorIs(t, err, verbs.ErrInvalid)
}

func TestErrorWrapsErrno(t *testing.T) {
	var err error = &verbs.Error{Op: "ibv_modify_qp", Errno: syscall.EINVAL}
	require.ErrorIs(t, err, syscall.EINVAL)
	require.NotErrorIs(t, err, syscall.EAGAIN)
	require.Equal(t, "verbs: ibv_modify_qp: invalid argument", err.Error())
	var ve *verbs.Error
	require.True(t, errors.As(err, &ve))
	require.Equal(t, "ibv_modify_qp", ve.Op)
}

// The enumerations print as libibverbs names them; values no name exists
// for print as numbers. (The numbering itself is checked against
// verbs.h at compile time: enums_cgo.go.)
func TestNames(t *testing.T) {
	for _, c := range []struct {
		v    interface{ String() string }
		want string
	}{
		{verbs.WCSuccess, "SUCCESS"},
		{verbs.WCRemAccessErr, "REM_ACCESS_ERR"},
		{verbs.WCRNRRetryExcErr, "RNR_RETRY_EXC_ERR"},
		{verbs.WCTMRndvIncomplete, "TM_RNDV_INCOMPLETE"},
		{verbs.WCStatus(99), "WCStatus(99)"},
		{verbs.WCRecv, "RECV"},
		{verbs.WCRecvRDMAWithImm, "RECV_RDMA_WITH_IMM"},
		{verbs.WCRDMARead, "RDMA_READ"},
		{verbs.WCOpcode(77), "WCOpcode(77)"},
		{verbs.EventCommEst, "COMM_EST"},
		{verbs.EventWQFatal, "WQ_FATAL"},
		{verbs.EventType(20), "EventType(20)"},
		{verbs.PortActive, "ACTIVE"},
		{verbs.LinkEthernet, "Ethernet"},
		{verbs.GIDTypeRoCEv2, "RoCEv2"},
		{verbs.RC, "RC"},
		{verbs.UD, "UD"},
		{verbs.QPType(9), "QPType(9)"},
		{verbs.OpSendWithImm, "SEND_WITH_IMM"},
		{verbs.OpRDMARead, "RDMA_READ"},
		{verbs.Opcode(0), "Opcode(0)"},
		{verbs.Opcode(6), "Opcode(6)"},
		{verbs.AsyncEvent{Type: verbs.EventCommEst, QPN: 0x11}, "COMM_EST qpn=0x11"},
		{verbs.AsyncEvent{Type: verbs.EventPortActive, Port: 1}, "PORT_ACTIVE port=1"},
		{verbs.AsyncEvent{Type: verbs.EventCQErr}, "CQ_ERR"},
	} {
		require.Equal(t, c.want, c.v.String())
	}
	require.Equal(t, 21, verbs.Objects{1, 2, 3, 4, 5, 6}.Total())
}
