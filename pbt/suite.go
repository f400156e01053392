package pbt

import (
	"fmt"
	"os"
	"reflect"
	"slices"
	"strconv"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/commands"
)

// Suite is the stateful property over engines of one configuration.
type Suite struct {
	Variant            // the engines' configuration (zero: the real engine)
	Coverage *Coverage // when set, collects what the runs covered
	// Last is the last run that failed. gopter shrinks by rerunning
	// simpler sequences and keeps the last one that still fails, so once
	// a check has failed, Last is the shrunk counterexample.
	Last      *Failure
	Sequences int // runs started (shrinking included)
	// Progress, when set, is called every 10000 runs with the count.
	Progress func(runs int)
}

// Failure is a failed run: the commands up to the first broken property.
type Failure struct {
	Model Model
	Variant
	Commands []commands.Command
	Err      error
}

// Scenario returns the failure as a replayable scenario that expects the
// property it broke to fail (expect="" makes it expect a pass instead:
// the regression test of an engine bug, red until the bug is fixed).
func (f *Failure) Scenario(expect string, comment ...string) *Scenario {
	return &Scenario{Comment: comment, Model: Model{Nodes: f.Model.Nodes, Seed: f.Model.Seed, Limits: f.Model.Limits, Auto: f.Model.Auto},
		Variant: f.Variant, Expect: expect, Commands: f.Commands}
}

// Commands returns the gopter commands of the suite.
func (st *Suite) Commands() commands.Commands {
	return &commands.ProtoCommands{
		NewSystemUnderTestFunc: func(init commands.State) commands.SystemUnderTest {
			m := init.(Model)
			s := NewSystem(m, st.Variant, st.Coverage)
			s.onFail = func(ran []op, err error) {
				f := &Failure{Model: m, Variant: st.Variant, Err: err}
				for _, c := range ran {
					f.Commands = append(f.Commands, c)
				}
				st.Last = f
			}
			st.Sequences++
			if st.Progress != nil && st.Sequences%10000 == 0 {
				st.Progress(st.Sequences)
			}
			if st.Coverage != nil {
				st.Coverage.Sequences++
			}
			return s
		},
		InitialStateGen: genInitial(),
		GenCommandFunc:  func(m commands.State) gopter.Gen { return genCommand(m.(Model)) },
	}
}

// Property is the stateful property: every invariant after every command,
// the liveness counterparts at the end of every sequence.
func (st *Suite) Property() gopter.Prop { return commands.Prop(st.Commands()) }

// Parameters returns gopter parameters for n sequences of up to maxLen
// commands (lengths grow from maxLen/8 to maxLen over the run), one worker
// so a seed replays exactly.
func Parameters(seed int64, n, maxLen int) *gopter.TestParameters {
	p := gopter.DefaultTestParametersWithSeed(seed)
	p.MinSuccessfulTests = n
	p.MinSize = max(maxLen/8, 1)
	p.MaxSize = maxLen
	p.Workers = 1
	p.MaxShrinkCount = 2000
	return p
}

// DefaultSeed is the seed of the suite when IBCM_PBT_SEED is not set.
const DefaultSeed = 20240501

// Seed returns IBCM_PBT_SEED, or DefaultSeed.
func Seed() (int64, error) {
	v := os.Getenv("IBCM_PBT_SEED")
	if v == "" {
		return DefaultSeed, nil
	}
	s, err := strconv.ParseInt(v, 0, 64)
	if err != nil {
		return 0, fmt.Errorf("IBCM_PBT_SEED: %w", err)
	}
	return s, nil
}

// Simplify tries the failure on simpler initial models (fewer nodes, no
// resource bounds; gopter does not shrink the initial state), then shrinks
// the commands further than gopter can: gopter removes chunks and shrinks
// one command at a time, but commands that pick by index (deliver i=,
// probe k=) often need a companion removed or re-indexed together. So it
// tries removing every pair of commands, and removing one command while
// shrinking another, until nothing simpler breaks the same property. It
// returns the simplest failure found (within a bounded number of replays).
func (f *Failure) Simplify() *Failure {
	best := f
	want := Invariant(f.Err)
	budget := 20000
	try := func(m Model, cs []commands.Command) bool {
		if budget == 0 {
			return false
		}
		budget--
		cs = normalize(cs, m.Nodes)
		sc := &Scenario{Model: m, Variant: f.Variant, Commands: cs}
		if err := sc.Replay(nil); err != nil && Invariant(err) == want {
			best = &Failure{Model: m, Variant: f.Variant, Commands: sc.Commands, Err: err}
			return true
		}
		return false
	}
	without := func(cs []commands.Command, i int) []commands.Command {
		return append(slices.Clone(cs[:i]), cs[i+1:]...)
	}
	for progress := true; progress && budget > 0; {
		progress = false
		if best.Model.Limits {
			m := best.Model
			m.Limits = false
			progress = try(m, best.Commands)
		}
		if best.Model.Auto && !progress {
			m := best.Model
			m.Auto = false
			progress = try(m, best.Commands)
		}
		for n := 2; n < best.Model.Nodes && !progress; n++ {
			m := best.Model
			m.Nodes = n
			progress = try(m, best.Commands)
		}
		if progress {
			continue
		}
		cs := best.Commands
	search:
		for i := range cs {
			if try(best.Model, without(cs, i)) {
				progress = true
				break search
			}
			for j := i + 1; j < len(cs); j++ {
				if try(best.Model, without(without(cs, j), i)) {
					progress = true
					break search
				}
			}
		}
		if progress {
			continue
		}
	variants:
		for i := range cs {
			for _, v := range cs[i].(op).shrink() {
				for j := range cs {
					if j == i {
						continue
					}
					x := slices.Clone(cs)
					x[i] = v
					if try(best.Model, without(x, j)) {
						progress = true
						break variants
					}
				}
			}
		}
	}
	return best
}

// normalize writes the node arguments of cs as the nodes they resolve to
// among n (the same commands, as a reader would see them).
func normalize(cs []commands.Command, n int) []commands.Command {
	out := make([]commands.Command, len(cs))
	for i, c := range cs {
		v := reflect.New(reflect.TypeOf(c)).Elem()
		v.Set(reflect.ValueOf(c))
		var nodes []reflect.Value
		for j := range v.NumField() {
			if v.Type().Field(j).Tag.Get("pbt") == "node" {
				f := v.Field(j)
				f.SetInt(f.Int() % int64(n))
				nodes = append(nodes, f)
			}
		}
		if len(nodes) == 2 && nodes[0].Int() == nodes[1].Int() { // From, To: onto From means the next node
			nodes[1].SetInt((nodes[0].Int() + 1) % int64(n))
		}
		out[i] = v.Interface().(commands.Command)
	}
	return out
}
