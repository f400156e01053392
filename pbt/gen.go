package pbt

import (
	"math/rand"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
)

// genInitial generates the initial model: 2–4 nodes, the seed of the
// engines' comm-ID allocators, one sequence in five with small resource
// bounds, one in four with an application that answers from the handler.
func genInitial() gopter.Gen {
	return gopter.CombineGens(gen.IntRange(2, 4), gen.UInt64(), gen.IntRange(0, 4), gen.IntRange(0, 3)).Map(func(v []any) Model {
		return Model{Nodes: v[0].(int), Seed: v[1].(uint64), Limits: v[2].(int) == 0, Auto: v[3].(int) == 0}
	})
}

// genCommand generates the next command of a sequence of genParams.MaxSize
// commands: Finish last, the others at random by weight. The generated
// value carries shrinkCommand, the explicit shrinker of its arguments.
func genCommand(m Model) gopter.Gen {
	return func(gp *gopter.GenParameters) *gopter.GenResult {
		var c op = Finish{}
		if m.Count != gp.MaxSize-1 {
			c = randomCommand(gp.Rng, m)
		}
		return gopter.NewGenResult(c, shrinkCommand)
	}
}

// randomCommand picks a command. Delivery dominates (the network must
// progress for the application to get anywhere); a node that listens is
// the likely destination of a connect; Connect favours reusing the QPN
// just disconnected and a live one.
func randomCommand(r *rand.Rand, m Model) op {
	small := func() int { // an id or message index: mostly the first
		if r.Intn(3) != 0 {
			return 0
		}
		return r.Intn(4)
	}
	node := func() int { return r.Intn(m.Nodes) }
	peer := func(from int) int { // another node, most likely one that listens
		if m.Listening != 0 && r.Intn(10) < 8 {
			var ls []int
			for i := range m.Nodes {
				if i != from && m.Listening&(1<<i) != 0 {
					ls = append(ls, i)
				}
			}
			if len(ls) > 0 {
				return ls[r.Intn(len(ls))]
			}
		}
		return (from + 1 + r.Intn(m.Nodes-1)) % m.Nodes
	}
	qpn := func() int {
		switch x := r.Intn(20); {
		case x < 7:
			return int(qpnFreed)
		case x < 13:
			return int(qpnLowest)
		case x < 16:
			return int(qpnLive)
		default:
			return int(qpnFresh)
		}
	}
	sid := func() int {
		if r.Intn(8) == 0 {
			return 1
		}
		return 0
	}
	listenW := 3
	if m.Listening == 0 {
		listenW = 40
	}
	table := []struct {
		w  int
		mk func() op
	}{
		{listenW, func() op { return Listen{Node: node(), SID: sid()} }},
		{12, func() op {
			f := node()
			return Connect{From: f, To: peer(f), SID: sid(), QPN: qpn(), K: small(),
				Retries: [...]int{0, 1, 2, 2, 3}[r.Intn(5)], Alt: r.Intn(4) == 0, Bad: [...]int{0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 3}[r.Intn(16)]}
		}},
		{8, func() op { return Accept{K: small(), QPN: qpn()} }},
		{2, func() op { return Reject{K: small()} }},
		{3, func() op { return MRA{K: small(), Timeout: r.Intn(len(mraTimeouts))} }},
		{6, func() op { return RTU{K: small()} }},
		{4, func() op { return DREP{K: small()} }},
		{5, func() op { return Disconnect{K: small()} }},
		{1, func() op { return CommEst{K: small()} }},
		{1, func() op { return Destroy{K: small()} }},
		{2, func() op { return LoadAlt{K: small()} }},
		{2, func() op { return APR{K: small(), Reject: r.Intn(3) == 0} }},
		{2, func() op { f := node(); return SIDR{From: f, To: peer(f), SID: sid(), BadPD: r.Intn(10) == 0} }},
		{2, func() op { return SIDRReply{K: small(), Reject: r.Intn(3) == 0} }},
		{3, func() op {
			return Probe{Op: r.Intn(len(probeOps)), K: r.Intn(8), Valid: r.Intn(2) == 0, Gone: r.Intn(6) == 0, BadPD: r.Intn(4) == 0}
		}},
		{1, func() op { return Inject{From: node(), Kind: r.Intn(5), I: small()} }},
		{30, func() op { return Deliver{I: small()} }},
		{3, func() op { return Drop{I: small()} }},
		{3, func() op { return Dup{I: small()} }},
		{3, func() op { return Reorder{I: small()} }},
		{6, func() op {
			if r.Intn(6) == 0 {
				return Advance{Far: true}
			}
			return Advance{N: 1 + r.Intn(3)}
		}},
		{1, func() op { return Crash{Node: node()} }},
	}
	total := 0
	for _, t := range table {
		total += t.w
	}
	x := r.Intn(total)
	for _, t := range table {
		if x < t.w {
			return t.mk()
		}
		x -= t.w
	}
	panic("unreachable")
}
