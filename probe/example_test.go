package probe_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/ibcm/ibcm/cm"
	"github.com/ibcm/ibcm/cm/simnet"
	"github.com/ibcm/ibcm/cm/wire"
	"github.com/ibcm/ibcm/internal/cmswitch"
	"github.com/ibcm/ibcm/probe"
)

// Probe a CM: here an ibcm Manager with the Linux seed bug, listening on a
// simulated fabric; on hardware the transport is a hw/umad port and the
// target a remote CM's address.
func Example() {
	f := simnet.NewFabric(simnet.Config{Seed: 1})
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// The target: a listener that accepts every REQ.
	tep := f.NewEndpoint()
	m, _ := cm.NewManager(cmswitch.Wrap(tep, cmswitch.Switches{LegacyTimeWaitQPN: true}), cm.ManagerConfig{LocalGUID: 2})
	defer m.Close()
	l, _ := m.Listen(ctx, cm.ListenParams{ServiceID: 0x1000})
	go func() {
		for {
			req, err := l.Accept(ctx)
			if err != nil {
				return
			}
			go req.Accept(ctx, &cm.AcceptParams{REP: wire.REP{LocalQPN: 0x99}})
		}
	}()

	// The prober.
	pep := f.NewEndpoint()
	rep, err := probe.Run(ctx, probe.Config{
		Transport: pep, Local: pep.LocalAddr(), LocalGUID: 1,
		Target: probe.Target{Addr: tep.LocalAddr(), GID: tep.LocalAddr().GID, LID: tep.LocalAddr().LID, ServiceID: 0x1000},
		Checks: []string{"establish", "timewait-qpn-reuse"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rep.Results {
		fmt.Println(strings.TrimSpace(fmt.Sprint(r.ID, " ", r.Verdict, " ", r.Name)))
	}
	fmt.Println("ok unless the seed deviates:", rep.OK(nil), rep.OK([]string{"timewait-qpn-reuse"}))
	// Output:
	// establish PASS
	// timewait-qpn-reuse DEVIATION stale-reject-in-timewait
	// ok unless the seed deviates: false true
}
