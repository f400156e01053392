package pbt

import (
	"bufio"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/ibcm/ibcm/cm/engine"
	"github.com/leanovate/gopter/commands"
)

// A scenario file (pbt/testdata/*.txt) is a command sequence to replay:
//
//	# comments
//	nodes 2
//	seed 7
//	legacy                      (optional: engines with LegacyTimeWaitQPN)
//	limits                      (optional: engines with small resource bounds)
//	auto                        (optional: the handler answers REPs and DREQs)
//	nostale                     (optional: engines with DisableStaleCheck)
//	reuse                       (optional: a crashed engine restarts its comm-ID sequence)
//	expect pass                 (or: expect fail <InvariantName>)
//	----
//	listen node=b sid=0
//	connect from=a to=b sid=0 qpn=freed k=0 retries=2
//	...
//
// A command line is its name and its arguments as key=value (nodes are
// a..d, QPN policies lowest/freed/live/fresh, probe calls by event name); a
// bool argument is its key alone; an argument left out is zero (the
// lowest QPN policy, the Destroy probe). Command.String() writes this form.

// registry names every command type.
var registry = []struct {
	name string
	zero op
}{
	{"listen", Listen{}}, {"connect", Connect{}}, {"sidr", SIDR{}}, {"accept", Accept{}},
	{"reject", Reject{}}, {"mra", MRA{}}, {"rtu", RTU{}}, {"drep", DREP{}}, {"commest", CommEst{}},
	{"disconnect", Disconnect{}}, {"destroy", Destroy{}}, {"lap", LoadAlt{}}, {"apr", APR{}},
	{"sidr-reply", SIDRReply{}}, {"probe", Probe{}}, {"inject", Inject{}}, {"deliver", Deliver{}}, {"drop", Drop{}},
	{"dup", Dup{}}, {"reorder", Reorder{}}, {"advance", Advance{}}, {"crash", Crash{}}, {"finish", Finish{}},
}

func cmdName(t reflect.Type) string {
	for _, r := range registry {
		if reflect.TypeOf(r.zero) == t {
			return r.name
		}
	}
	return t.Name()
}

// format writes a command as a scenario line.
func format(c op) string {
	v := reflect.ValueOf(c)
	t := v.Type()
	var b strings.Builder
	b.WriteString(cmdName(t))
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		key := strings.ToLower(f.Name)
		fv := v.Field(i)
		if fv.Kind() == reflect.Bool {
			if fv.Bool() {
				b.WriteString(" " + key)
			}
			continue
		}
		x := int(fv.Int())
		if x == 0 && f.Tag.Get("pbt") != "node" {
			continue // the default
		}
		var val string
		switch f.Tag.Get("pbt") {
		case "node":
			val = NodeName(x % 4)
		case "qpn":
			val = qpnPolicy(x % int(numQPNPolicies)).String()
		case "probe":
			val = probeOps[x%len(probeOps)].String()
		default:
			val = strconv.Itoa(x)
		}
		fmt.Fprintf(&b, " %s=%s", key, val)
	}
	return b.String()
}

// ParseCommand reads a command written by String.
func ParseCommand(line string) (commands.Command, error) {
	words := strings.Fields(line)
	if len(words) == 0 {
		return nil, fmt.Errorf("empty command")
	}
	i := slices.IndexFunc(registry, func(r struct {
		name string
		zero op
	}) bool {
		return r.name == words[0]
	})
	if i < 0 {
		return nil, fmt.Errorf("unknown command %q", words[0])
	}
	t := reflect.TypeOf(registry[i].zero)
	v := reflect.New(t).Elem()
	for _, w := range words[1:] {
		key, val, hasVal := strings.Cut(w, "=")
		fi := slices.IndexFunc(reflect.VisibleFields(t), func(f reflect.StructField) bool {
			return f.IsExported() && strings.ToLower(f.Name) == key
		})
		if fi < 0 {
			return nil, fmt.Errorf("%s: unknown argument %q", words[0], key)
		}
		f := reflect.VisibleFields(t)[fi]
		fv := v.FieldByIndex(f.Index)
		if fv.Kind() == reflect.Bool {
			if hasVal {
				return nil, fmt.Errorf("%s: %s takes no value", words[0], key)
			}
			fv.SetBool(true)
			continue
		}
		if !hasVal {
			return nil, fmt.Errorf("%s: %s needs a value", words[0], key)
		}
		var x int
		var err error
		switch f.Tag.Get("pbt") {
		case "node":
			if len(val) != 1 || val[0] < 'a' || val[0] > 'd' {
				err = fmt.Errorf("bad node %q", val)
			}
			x = int(val[0] - 'a')
		case "qpn":
			x = slices.Index(qpnNames[:], val)
			if x < 0 {
				err = fmt.Errorf("bad QPN policy %q", val)
			}
		case "probe":
			x = slices.IndexFunc(probeOps[:], func(e engine.Event) bool { return e.String() == val })
			if x < 0 {
				err = fmt.Errorf("bad probe call %q", val)
			}
		default:
			x, err = strconv.Atoi(val)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", words[0], key, err)
		}
		fv.SetInt(int64(x))
	}
	return v.Interface().(commands.Command), nil
}

// Scenario is a replayable command sequence.
type Scenario struct {
	Comment []string
	Model   Model
	Variant
	Expect   string // "" (pass) or the name of the invariant that must fail
	Commands []commands.Command
}

// ReadScenario parses a scenario file.
func ReadScenario(r io.Reader) (*Scenario, error) {
	sc := &Scenario{Model: Model{Nodes: 2}}
	in := bufio.NewScanner(r)
	body := false
	for ln := 1; in.Scan(); ln++ {
		line := strings.TrimSpace(in.Text())
		if line == "" {
			continue
		}
		if strings.HasPrefix(line, "#") {
			sc.Comment = append(sc.Comment, strings.TrimSpace(strings.TrimPrefix(line, "#")))
			continue
		}
		if !body {
			words := strings.Fields(line)
			var err error
			switch {
			case words[0] == "----":
				body = true
			case words[0] == "nodes" && len(words) == 2:
				sc.Model.Nodes, err = strconv.Atoi(words[1])
				if err == nil && (sc.Model.Nodes < 2 || sc.Model.Nodes > 4) {
					err = fmt.Errorf("2 to 4 nodes")
				}
			case words[0] == "seed" && len(words) == 2:
				sc.Model.Seed, err = strconv.ParseUint(words[1], 10, 64)
			case words[0] == "legacy" && len(words) == 1:
				sc.Legacy = true
			case words[0] == "nostale" && len(words) == 1:
				sc.NoStale = true
			case words[0] == "reuse" && len(words) == 1:
				sc.ReuseIDs = true
			case words[0] == "limits" && len(words) == 1:
				sc.Model.Limits = true
			case words[0] == "auto" && len(words) == 1:
				sc.Model.Auto = true
			case words[0] == "expect" && len(words) == 2 && words[1] == "pass":
			case words[0] == "expect" && len(words) == 3 && words[1] == "fail":
				sc.Expect = words[2]
			default:
				err = fmt.Errorf("unknown header %q", line)
			}
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", ln, err)
			}
			continue
		}
		c, err := ParseCommand(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", ln, err)
		}
		sc.Commands = append(sc.Commands, c)
	}
	if err := in.Err(); err != nil {
		return nil, err
	}
	if !body {
		return nil, fmt.Errorf("no ---- line before the commands")
	}
	return sc, nil
}

// String writes the scenario in the file format.
func (sc *Scenario) String() string {
	var b strings.Builder
	for _, c := range sc.Comment {
		fmt.Fprintf(&b, "# %s\n", c)
	}
	fmt.Fprintf(&b, "nodes %d\nseed %d\n", sc.Model.Nodes, sc.Model.Seed)
	if sc.Legacy {
		b.WriteString("legacy\n")
	}
	if sc.ReuseIDs {
		b.WriteString("reuse\n")
	}
	if sc.NoStale {
		b.WriteString("nostale\n")
	}
	if sc.Model.Limits {
		b.WriteString("limits\n")
	}
	if sc.Model.Auto {
		b.WriteString("auto\n")
	}
	if sc.Expect == "" {
		b.WriteString("expect pass\n")
	} else {
		fmt.Fprintf(&b, "expect fail %s\n", sc.Expect)
	}
	b.WriteString("----\n")
	for _, c := range sc.Commands {
		b.WriteString(c.String() + "\n")
	}
	return b.String()
}

// Replay runs the scenario with commands.Replay and returns the first
// failure (nil when every postcondition held). log, when set, gets the
// annotated transcript.
func (sc *Scenario) Replay(log func(string)) error {
	_, err := sc.Run(log)
	return err
}

// Run is Replay that also returns the system, for a look at its state.
func (sc *Scenario) Run(log func(string)) (*System, error) {
	s := NewSystem(sc.Model, sc.Variant, nil)
	s.Log = log
	var first error
	s.onFail = func(_ []op, err error) { first = err }
	res := commands.Replay(s, Model{Nodes: sc.Model.Nodes, Seed: sc.Model.Seed, Limits: sc.Model.Limits, Auto: sc.Model.Auto}, sc.Commands...)
	if first == nil && !res.Success() {
		first = fmt.Errorf("replay failed: %v", res.Labels)
	}
	return s, first
}

// Invariant returns the name a failure's message starts with.
func Invariant(err error) string {
	if err == nil {
		return ""
	}
	name, _, _ := strings.Cut(err.Error(), ":")
	return name
}
