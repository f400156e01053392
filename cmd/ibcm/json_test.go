package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ibcm/ibcm/internal/report"
)

// TestJSONLines runs connect with --json: every line of its output is a
// record that internal/report reads back, and read back it prints the
// readable line the text form has.
func TestJSONLines(t *testing.T) {
	t.Parallel()
	code, out, stderr := runCmd(t, nil, append([]string{"connect", "--json", "--transport", "sim", "--sim-fabric", fabricName(t),
		"--sim-peer", "--sid", "0x1000", "--count", "2", "--qpn", "0x100", "--trace"}, fast...)...)
	require.Equal(t, 0, code, out+stderr)
	recs, err := report.Parse(strings.NewReader(out))
	require.NoError(t, err)
	require.Len(t, recs, strings.Count(out, "\n"), "every line is a record:\n%s", out)

	res := report.Filter(recs, report.Result, "connect")
	require.Len(t, res, 1)
	assert.Equal(t, "PASS", res[0].Str("verdict"))
	assert.Equal(t, []string{"local-disconnect", "local-disconnect"}, res[0].List("outcomes"))
	assert.Regexp(t, `^IBCM-RESULT connect PASS conns=2 outcomes=local-disconnect,local-disconnect want=established t=\d+\.\d{3}$`, res[0].Text())

	var names []string
	for _, r := range report.Filter(recs, report.Event, "") {
		if n, err := r.Int("conn"); err == nil {
			names = append(names, fmt.Sprintf("%s/%d", r.Name, n))
		}
	}
	for k := 1; k <= 2; k++ {
		inOrder(t, names, fmt.Sprintf("REQ-SENT/%d", k), fmt.Sprintf("ESTABLISHED/%d", k), fmt.Sprintf("DISCONNECTED/%d", k),
			fmt.Sprintf("TIMEWAIT/%d", k), fmt.Sprintf("TIMEWAIT-EXIT/%d", k))
	}
	est := report.Filter(recs, report.Event, "ESTABLISHED")
	require.Len(t, est, 2)
	qpn, err := est[1].Uint("qpn")
	require.NoError(t, err)
	assert.EqualValues(t, 0x101, qpn)
	steps := report.Filter(recs, report.Step, "")
	require.NotEmpty(t, steps)
	assert.Regexp(t, `^IBCM-STEP t=\S+ (conn=1 )?id=0x[0-9a-f]+ \S+ \S+ -> \S+ \S+$`, steps[0].Text())
	assert.Len(t, report.Filter(recs, report.Stats, ""), 1)
}
