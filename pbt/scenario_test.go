package pbt

import (
	"reflect"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"
	"github.com/stretchr/testify/require"
)

// weight is a measure every shrink must decrease: the sum of a command's
// arguments, a set bool counting 1 (Advance far counts 10).
func weight(c any) int {
	v := reflect.ValueOf(c)
	w := 0
	for i := range v.NumField() {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		f := v.Field(i)
		if f.Kind() == reflect.Bool {
			if f.Bool() {
				w += 10
			}
			continue
		}
		w += int(f.Int())
	}
	return w
}

// Every generated command reads back from its scenario line, and every
// variant its shrinker offers is another command of the same kind with a
// smaller weight (so shrinking ends).
func TestCommandsRoundTripAndShrink(t *testing.T) {
	sd := seed(t)
	params := gopter.DefaultTestParametersWithSeed(sd)
	params.MinSuccessfulTests = 2000
	props := gopter.NewProperties(params)
	props.Property("parse(format(c)) = c; shrinks are smaller", prop.ForAll(func(c op) string {
		back, err := ParseCommand(c.String())
		if err != nil {
			return err.Error()
		}
		if !reflect.DeepEqual(back, commandsCommand(c)) {
			return "read back as " + back.String()
		}
		for _, s := range c.shrink() {
			if reflect.TypeOf(s) != reflect.TypeOf(c) || weight(s) >= weight(c) {
				return "shrinks to " + s.String()
			}
		}
		return ""
	}, genCommand(Model{Nodes: 4, Listening: 0b0101, Count: -10})))
	props.TestingRun(t)
}

func commandsCommand(c op) any { return c }

func TestReadScenarioErrors(t *testing.T) {
	for _, bad := range []string{
		"nodes 2\nlisten node=a\n",                // no ----
		"nodes 5\n----\n",                         // too many nodes
		"nodes 2\n----\nlisten node=e\n",          // no such node
		"nodes 2\n----\nconnect from=a qpn=new\n", // no such policy
		"nodes 2\n----\nfly\n",                    // no such command
		"nodes 2\n----\nconnect alt=1\n",          // a flag takes no value
		"nodes 2\nexpect maybe\n----\n",           // bad expectation
	} {
		_, err := ReadScenario(strings.NewReader(bad))
		require.Error(t, err, bad)
	}
	sc, err := ReadScenario(strings.NewReader("# c\nnodes 3\nseed 9\nlimits\nexpect fail StaleDetected\n----\nprobe op=Accept k=2 valid\n"))
	require.NoError(t, err)
	require.Equal(t, "# c\nnodes 3\nseed 9\nlimits\nexpect fail StaleDetected\n----\nprobe op=Accept k=2 valid\n", sc.String())
}
