package conformance

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ibcm/ibcm/cm/engine"
)

// TestMapping checks mapping.go against spec/cm.tla, spec/Tracecm.tla, the
// converter and the engine's events.
func TestMapping(t *testing.T) {
	spec, err := os.ReadFile("../../spec/cm.tla")
	if err != nil {
		t.Fatal(err)
	}
	src := string(spec)
	// The actions of Next: the names it applies (Name or Name(args)).
	next := src[strings.Index(src, "\nNext ==")+1:]
	next = next[:strings.Index(next, "\n\n")]
	var inNext []string
	for _, m := range regexp.MustCompile(`\\/ ([A-Z][A-Za-z]*)`).FindAllStringSubmatch(next, -1) {
		inNext = append(inNext, m[1])
	}
	for _, m := range regexp.MustCompile(`\\E n(?:, r)? \\in Nodes : ([A-Z][A-Za-z]*)\(`).FindAllStringSubmatch(next, -1) {
		inNext = append(inNext, m[1])
	}
	slices.Sort(inNext)
	inNext = slices.Compact(inNext)
	actions := SpecActions()
	slices.Sort(actions)
	if !slices.Equal(inNext, actions) {
		t.Errorf("spec/cm.tla Next has actions %v;\nmapping.go ActionMap has %v", inNext, actions)
	}

	// Every engine event named is a engine.Event, and every event the
	// converter takes is in ActionMap with the same action.
	events := map[string]bool{}
	for ev := engine.Event(0); int(ev) < engine.NumEvents; ev++ {
		events[ev.String()] = true
	}
	byEvent := map[string]string{}
	for _, a := range ActionMap {
		for _, ev := range a.Events {
			if !events[ev] {
				t.Errorf("ActionMap %s: %q is not a engine.Event", a.Action, ev)
			}
			if ev != "Stale" {
				byEvent[ev] = a.Action
			}
		}
	}
	for ev, action := range modelEvents {
		if ev == "Crash" || ev == "Inject" {
			continue
		}
		if byEvent[ev] != action {
			t.Errorf("the converter maps event %s to %s, ActionMap to %q", ev, action, byEvent[ev])
		}
	}

	// Tracecm.tla handles every action a trace can name.
	trace, err := os.ReadFile("../../spec/Tracecm.tla")
	if err != nil {
		t.Fatal(err)
	}
	for _, action := range modelEvents {
		if !strings.Contains(string(trace), `Line.ev = "`+action+`"`) {
			t.Errorf("spec/Tracecm.tla has no case for %s", action)
		}
	}

	// VarMap names every variable of the spec.
	vars := regexp.MustCompile(`(?s)VARIABLES\n(.*?)\n\n`).FindStringSubmatch(src)
	if vars == nil {
		t.Fatal("no VARIABLES in spec/cm.tla")
	}
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-zA-Z]+),?\s`).FindAllStringSubmatch(vars[1], -1) {
		found := false
		for _, v := range VarMap {
			found = found || strings.HasPrefix(v.Var, m[1])
		}
		if !found {
			t.Errorf("spec variable %s is missing from VarMap", m[1])
		}
	}
	// And the projection produces exactly those variables.
	cfg, err := ReadModelConfig("../../spec/cm_graph.cfg")
	if err != nil {
		t.Fatal(err)
	}
	proj := NewWorld(cfg, nil, nil).Project()
	for _, m := range regexp.MustCompile(`(?m)^\s+([a-zA-Z]+),?\s`).FindAllStringSubmatch(vars[1], -1) {
		if _, ok := proj[m[1]]; !ok {
			t.Errorf("World.Project has no %s", m[1])
		}
	}
	if len(proj) != len(regexp.MustCompile(`(?m)^\s+([a-zA-Z]+),?\s`).FindAllString(vars[1], -1)) {
		t.Errorf("World.Project has %d variables", len(proj))
	}
}
