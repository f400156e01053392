package cm_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
)

// The active side's Established says that the Manager sent the RTU (Sent);
// the passive side's, which the peer's RTU caused, says nothing was sent.
func TestEstablishedSaysWhoSentTheRTU(t *testing.T) {
	var mu sync.Mutex
	sent := map[string]wire.AttrID{}
	record := func(side string) func(cm.Event) {
		return func(ev cm.Event) {
			if ev.Kind == cm.EventEstablished {
				mu.Lock()
				sent[side] = ev.Sent
				mu.Unlock()
			}
		}
	}
	p := newPair(t, simnet.Config{}, cm.ManagerConfig{OnEvent: record("active")}, cm.ManagerConfig{OnEvent: record("passive")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.b.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	require.NoError(t, err)
	served := make(chan *cm.Conn, 1)
	serve(ctx, t, l, served)
	_, err = p.a.Connect(ctx, fastREQ(p.eb, 0x1000, 0x100))
	require.NoError(t, err)
	<-served
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[string]wire.AttrID{"active": wire.AttrRTU, "passive": 0}, sent)
}
