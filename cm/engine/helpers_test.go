package engine

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/ibcm/ibcm/cm/transport"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/stretchr/testify/require"
)

// cellHits records which table cells the tests in this binary exercised
// (TestTableCoverage checks it at the end).
var cellHits struct {
	sync.Mutex
	main [NumStates][NumEvents]int
	lap  [NumLAPStates][NumEvents]int
}

// RecordCell is a Tracer that records coverage; every test engine uses it.
func RecordCell(ts TraceStep) {
	cellHits.Lock()
	defer cellHits.Unlock()
	cellHits.main[ts.From][ts.Event]++
	if ts.Kind == KindSub {
		cellHits.lap[ts.LAPFrom][ts.Event]++
	}
}

// testNode is an engine with an address, for unit tests that pump MADs by
// hand.
type testNode struct {
	t    *testing.T
	e    *Engine
	addr transport.Addr
	now  Time
	in   []transport.Packet // received, not yet delivered
	log  []string
}

func newTestNode(t *testing.T, guid uint64, lid uint16, cfg Config) *testNode {
	cfg.LocalGUID = guid
	cfg.Seed = guid
	if cfg.Trace == nil {
		cfg.Trace = RecordCell
	}
	return &testNode{t: t, e: NewEngine(cfg), addr: transport.Addr{LID: lid, QPN: 1, QKey: transport.GSIQKey}}
}

// pump moves every outbound MAD of the nodes to its destination (by LID)
// and delivers it, until nothing moves; notifications are returned per node.
func pump(t *testing.T, nodes ...*testNode) map[*testNode][]Notification {
	t.Helper()
	notes := map[*testNode][]Notification{}
	for moved := true; moved; {
		moved = false
		for _, n := range nodes {
			rd := n.e.Ready()
			for _, nt := range rd.Notifications {
				if nt.Msg != nil {
					cp := *nt.Msg
					nt.Msg = &cp
				}
				notes[n] = append(notes[n], nt)
			}
			for _, p := range rd.Messages {
				for _, d := range nodes {
					if d.addr.LID == p.Addr.LID {
						src := n.addr
						src.QKey = transport.GSIQKey
						d.in = append(d.in, transport.Packet{Addr: src, MAD: p.MAD})
						n.log = append(n.log, describe(p.MAD[:]))
					}
				}
			}
			n.e.Advance()
		}
		for _, n := range nodes {
			for len(n.in) > 0 {
				p := n.in[0]
				n.in = n.in[1:]
				require.NoError(t, n.e.Recv(n.now, p.Addr, p.MAD[:]))
				moved = true
			}
		}
	}
	return notes
}

func describe(b []byte) string {
	var m wire.MAD
	if err := wire.DecodeMAD(b, &m); err != nil {
		return "bad:" + err.Error()
	}
	switch m.AttrID {
	case wire.AttrREJ:
		return fmt.Sprintf("REJ(%d)", m.REJ.Reason)
	}
	return m.AttrID.String()
}

func noticeList(ns []Notification) string {
	var s []string
	for _, n := range ns {
		s = append(s, n.Notice.String())
	}
	return strings.Join(s, ",")
}

func testREQ(sid uint64, qpn uint32) *ConnectParams {
	return &ConnectParams{REQ: wire.REQ{ServiceID: sid, LocalQPN: qpn, StartingPSN: 1,
		RemoteCMResponseTimeout: 10, LocalCMResponseTimeout: 10, MaxCMRetries: 3,
		PrimaryLocalAckTimeout: 10, PathPacketPayloadMTU: wire.MTU1024}}
}
