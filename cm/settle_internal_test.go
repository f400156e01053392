package cm

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/simnet"
)

// Settling a Conn whose attempt ended, and whose comm ID the engine has
// given to another connection since (a Connect given up while its QP
// moved, after a REJ freed the id), leaves the new owner alone: it stays
// the Manager's, and its TimeWaitExit open.
func TestSettlingAStaleConnLeavesTheIDsOwner(t *testing.T) {
	fab := simnet.NewFabric(simnet.Config{})
	defer fab.Close()
	m, err := NewManager(fab.NewEndpoint(), ManagerConfig{LocalGUID: 1})
	require.NoError(t, err)
	defer m.Close()
	const id = CommID(7)
	owner, stale := newConn(m, id), newConn(m, id)
	m.mu.Lock()
	m.conns[id] = owner
	m.settleWith(stale, ErrTimeout)
	got := m.conns[id]
	m.mu.Unlock()
	require.Same(t, owner, got, "the id's owner was dropped")
	select {
	case <-owner.TimeWaitExit():
		t.Fatal("the id's owner was released")
	default:
	}
	require.Error(t, stale.Err(), "the stale Conn ends")
}
