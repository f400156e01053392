package session

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/cm/transport"
)

// simOptions are the options of a session on the simulated fabric fabric.
func simOptions(name, fabric string, count int) *Options {
	return &Options{Transport: "sim", SimFabric: fabric, GIDIndex: -1, SID: 0x1000, QPN: 0x1000, QPNStep: 1, Count: count,
		Retries: 15, RespTimeout: 20, AckTimeout: 10, Expect: "established", Name: name, Seed: 1, WaitTimeWait: true,
		Events: true, Timeout: time.Minute}
}

// A listen and a connect session, driven by Options alone, establish and
// end Count connections and judge them as their records say.
func TestListenAndConnectSessions(t *testing.T) {
	fabric := "session-" + t.Name()
	lo := simOptions("listen", fabric, 2)
	lo.Hold = -1
	co := simOptions("connect", fabric, 2)
	co.Hold = 10 * time.Millisecond
	co.Expect = "local-disconnect"
	lo.Expect = "peer-disconnect"

	ready := make(chan transport.Addr, 1)
	// Read once each session ended: its output queue is closed by then.
	var lout, cout bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Listen(context.Background(), lo, &ListenConfig{OnListening: func(a transport.Addr) { ready <- a }}, &lout)
	}()
	select {
	case a := <-ready:
		co.To = &a
	case code := <-done:
		t.Fatalf("listen ended (%d) before listening:\n%s", code, lout.String())
	}
	assert.Equal(t, 0, Connect(context.Background(), co, &ConnectConfig{}, &cout), cout.String())
	assert.Equal(t, 0, <-done, lout.String())

	assert.Contains(t, cout.String(), "IBCM-RESULT connect PASS conns=2 outcomes=local-disconnect,local-disconnect want=local-disconnect ")
	assert.Contains(t, lout.String(), "IBCM-RESULT listen PASS conns=2 outcomes=peer-disconnect,peer-disconnect want=peer-disconnect ")
	for _, ev := range []string{"IBCM-EVENT READY", "IBCM-EVENT REQ-SENT", "IBCM-EVENT ESTABLISHED", "IBCM-EVENT DREP-RECEIVED", "IBCM-EVENT TIMEWAIT-EXIT"} {
		assert.Contains(t, cout.String(), ev)
	}
	for _, ev := range []string{"IBCM-EVENT LISTENING", "IBCM-EVENT REQ-RECEIVED", "IBCM-EVENT DREP-SENT"} {
		assert.Contains(t, lout.String(), ev)
	}
	require.Equal(t, 1, strings.Count(lout.String(), "IBCM-STATS"), lout.String())
}
