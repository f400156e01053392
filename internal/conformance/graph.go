package conformance

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// GraphReport is what a graph replay did.
type GraphReport struct {
	States, Edges      int            // replayed (reached) states, edges replayed with a match
	Steps              int            // engine steps run in all, prefixes included
	Replays            int            // paths replayed from the initial state
	ByAction           map[string]int // matched edges per action
	Mismatches         []string       // edges no candidate step reproduced
	TimingInfeasible   []string       // edges whose timer order no tried timeouts reproduce
	UnreachedStates    int
	MaxDepth           int
	TimingSearchReplay int // replays spent searching timeouts
}

type pathInfo struct {
	steps  []Step
	states []string // the state after each step
	timing Timing
}

// ReplayGraph replays every edge of g on the engines: for each edge s -> t
// it replays a shortest path to s from the initial state, then the edge's
// action (trying each parameterization the action label allows: which
// node and handle, which message, whether the network keeps a copy), and
// requires the projection of the engines to equal the spec's state after
// every step. maxTries bounds the timeout search per edge.
func ReplayGraph(g *Graph, cfg *ModelConfig, maxTries int) *GraphReport {
	rep := &GraphReport{ByAction: map[string]int{}}
	out := map[string][]Edge{}
	for _, e := range g.Edges {
		out[e.From] = append(out[e.From], e)
	}
	init := g.Init[0]
	paths := map[string]*pathInfo{init: {}}
	w := NewWorld(cfg, nil, nil)
	if d := Diff(g.States[init], w.Project()); len(d) > 0 {
		rep.Mismatches = append(rep.Mismatches, "initial state:\n"+strings.Join(d, "\n"))
		return rep
	}
	queue := []string{init}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		ps := paths[s]
		rep.MaxDepth = max(rep.MaxDepth, len(ps.steps))
		for _, e := range out[s] {
			cands := candidates(g, e, cfg)
			var lastErr error
			matched := false
			for _, c := range cands {
				steps := append(slices.Clip(ps.steps), c)
				states := append(slices.Clip(ps.states), e.To)
				timing, err := replaySearch(g, cfg, steps, states, ps.timing, maxTries, rep)
				if err != nil {
					lastErr = err
					continue
				}
				matched = true
				rep.Edges++
				rep.ByAction[e.Action]++
				if _, seen := paths[e.To]; !seen {
					paths[e.To] = &pathInfo{steps: steps, states: states, timing: timing}
					queue = append(queue, e.To)
				}
				break
			}
			if !matched {
				msg := fmt.Sprintf("edge %s --%s--> %s after %v: %v", short(s), e.Action, short(e.To), ps.steps, lastErr)
				if errors.Is(lastErr, ErrTiming) {
					rep.TimingInfeasible = append(rep.TimingInfeasible, msg)
				} else {
					rep.Mismatches = append(rep.Mismatches, msg)
				}
			}
		}
	}
	rep.States = len(paths)
	rep.UnreachedStates = len(g.States) - len(paths)
	return rep
}

func short(fp string) string {
	if len(fp) > 8 {
		return fp[:8]
	}
	return fp
}

// replaySearch replays steps from the initial state, checking the state
// after each; on ErrTiming it tries other timeouts (an odometer over the
// choices made before the failing step), starting from start.
func replaySearch(g *Graph, cfg *ModelConfig, steps []Step, states []string, start Timing, maxTries int,
	rep *GraphReport) (Timing, error) {
	timing := slices.Clone(start)
	var err error
	for try := 0; try < maxTries; try++ {
		rep.Replays++
		if try > 0 {
			rep.TimingSearchReplay++
		}
		var w *World
		w, err = replay(g, cfg, steps, states, timing, rep)
		if err == nil {
			return timing[:min(len(timing), w.choice)], nil
		}
		if !errors.Is(err, ErrTiming) {
			return nil, err
		}
		// Next timeouts: advance the last choice made before the failure.
		k := w.choice
		for len(timing) < k {
			timing = append(timing, 0)
		}
		timing = timing[:k]
		pos := k - 1
		for ; pos >= 0; pos-- {
			timing[pos]++
			if timing[pos] < w.options[pos] {
				break
			}
			timing[pos] = 0
		}
		if pos < 0 {
			return nil, err
		}
	}
	return nil, err
}

func replay(g *Graph, cfg *ModelConfig, steps []Step, states []string, timing Timing, rep *GraphReport) (*World, error) {
	w := NewWorld(cfg, timing, nil)
	for i, s := range steps {
		rep.Steps++
		if err := w.Apply(s); err != nil {
			if errors.Is(err, ErrTiming) {
				return w, fmt.Errorf("step %d %s: %w", i+1, s, err)
			}
			return w, fmt.Errorf("step %d %s: %v", i+1, s, err)
		}
		if i < len(steps)-1 && !EveryStep {
			continue // the prefix: each of its steps was checked as an edge of its own
		}
		if d := Diff(g.States[states[i]], w.Project()); len(d) > 0 {
			return w, fmt.Errorf("step %d %s: state differs:\n%s", i+1, s, strings.Join(d, "\n"))
		}
	}
	return w, nil
}

// EveryStep compares the projection after every step of every replayed
// path, not only after the edge's own step (IBCM_GRAPH_EVERY_STEP=1). The
// default checks each step once, when its edge is replayed: a path's
// prefix is a sequence of edges already checked, replayed the same way.
var EveryStep = os.Getenv("IBCM_GRAPH_EVERY_STEP") == "1"

// msgTypes is the message type each receive action takes.
var msgTypes = map[string]string{
	"RecvREQ": "REQ", "RecvREQStale": "REQ", "RecvREQUnlisted": "REQ", "RecvREQRefused": "REQ", "RecvREQDropped": "REQ",
	"RecvREP": "REP", "RecvREPStale": "REP", "RecvMRA": "MRA", "RecvREJ": "REJ", "RecvREJStale": "REJ",
	"RecvRTU": "RTU", "RecvDREQ": "DREQ", "RecvDREQOtherQPN": "DREQ", "RecvDREP": "DREP",
	"RecvLAP": "LAP", "RecvAPR": "APR", "RecvAPRRejected": "APR",
	"RecvSIDRREQ": "SIDR_REQ", "RecvSIDRREQUnlisted": "SIDR_REQ", "RecvSIDRREQDropped": "SIDR_REQ", "RecvSIDRREP": "SIDR_REP",
	"RecvClassPortInfoGet": "GET", "RecvGetResp": "GETRESP",
}

// candidates lists the parameterizations of an edge's action, likeliest
// first.
func candidates(g *Graph, e Edge, cfg *ModelConfig) []Step {
	s, t := g.States[e.From], g.States[e.To]
	var out []Step
	switch {
	case e.Action == "Crash":
		for _, n := range cfg.Nodes {
			out = append(out, Step{Action: "Crash", N: n})
		}
	case e.Action == "QueryPortInfo":
		// A new Get, or (a step that leaves the state as it was) one
		// already in flight.
		for _, m := range t["net"].Elems {
			if m.Get("type").Str == "GET" && (e.From == e.To || !slices.ContainsFunc(s["net"].Elems, m.Equal)) {
				out = append(out, Step{Action: e.Action, N: int(m.Get("src").Int), R: int(m.Get("dst").Int)})
			}
		}
	case e.Action == "Lose":
		for _, m := range s["net"].Elems {
			if !slices.ContainsFunc(t["net"].Elems, m.Equal) {
				out = append(out, Step{Action: "Lose", Msg: m})
			}
		}
	case msgTypes[e.Action] != "":
		for _, m := range s["net"].Elems {
			if m.Get("type").Str != msgTypes[e.Action] {
				continue
			}
			kept := slices.ContainsFunc(t["net"].Elems, m.Equal)
			keeps := []bool{false}
			if cfg.Duplicate {
				keeps = []bool{kept, !kept}
			}
			for _, k := range keeps {
				out = append(out, Step{Action: e.Action, Msg: m, Keep: k})
			}
		}
	default:
		// An app call or a timer on one id: the slots that changed first.
		var changed, others []Step
		for i, n := range cfg.Nodes {
			for j, h := range cfg.Handles {
				cs, ct := s["conn"].Elems[i].Elems[j], t["conn"].Elems[i].Elems[j]
				st := Step{Action: e.Action, N: n, H: h}
				switch e.Action {
				case "Connect":
					st.Q, st.R = int(ct.Get("qpn").Int), int(ct.Get("rnode").Int)
					st.SID, st.K, st.Alt = int(ct.Get("sid").Int), int(ct.Get("maxr").Int), ct.Get("alt").Int != 0
				case "SIDRRequest":
					st.R, st.SID, st.K = int(ct.Get("rnode").Int), int(ct.Get("sid").Int), int(ct.Get("maxr").Int)
				case "Listen":
					st.SID, st.Mask = int(ct.Get("sid").Int), int(ct.Get("mask").Int)
				case "Accept":
					st.Q = int(ct.Get("qpn").Int)
				}
				var sts []Step
				if e.Action == "SIDRReply" {
					for _, x := range []int{0, 2} {
						st.X = x
						sts = append(sts, st)
					}
				} else {
					sts = []Step{st}
				}
				if !cs.Equal(ct) {
					changed = append(changed, sts...)
				} else if cs.Get("state").Str != "IDLE" {
					others = append(others, sts...)
				}
			}
		}
		out = append(changed, others...)
	}
	return out
}
