package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The runs as bench-b.sh and bench-a.sh frame them (guest.sh's records),
// with the ibcm and cmtime output between.
const (
	bLog = `{"frame":"begin","vm":"B","log":"test","t":5.0}
{"frame":"note","vm":"B","msg":"kcm","t":6.0,"fields":{"switch":"off","took":"0.250","modules":"20"}}
{"frame":"note","vm":"B","msg":"console","t":6.5,"fields":{"bytes":"184000","seconds":"0.530"}}
{"frame":"begin","vm":"B","log":"passive-ibcm-qp-n20-r1","t":8.1,"fields":{"role":"passive","side":"ibcm","out":"qp","n":"20","round":"1"}}
IBCM-EVENT READY t=0.070 transport=umad
IBCM-EVENT ESTABLISHED t=0.2 conn=1
[   9.1] ib_core: a kernel line
IBCM-RESULT passive-ibcm-qp-n20-r1 PASS conns=20
{"frame":"end","vm":"B","log":"passive-ibcm-qp-n20-r1","rc":0,"t":12.5,"fields":{"rss-peak-kib":"12276","slab-peak-kib":"300","proc-user-s":"1.33","proc-sys-s":"1.15","cpu-busy":"66%","cpu-user-s":"0.47","cpu-sys-s":"0.59","cpu-irq-s":"0.08","load":"7.1,7.2,7.3","file-lines":"9","file-bytes":"900"}}
{"frame":"begin","vm":"B","log":"active-kernel-n20-r1","t":13.0,"fields":{"role":"active","side":"kernel","out":"-","n":"20","round":"1"}}
step              total ms     max ms     min us  us / conn
connect      :      861.53     834.21  224532.00   43076.35
disconnect   :      296.63      34.69    5854.00   14831.65
{"frame":"end","vm":"B","log":"active-kernel-n20-r1","rc":0,"t":15.0,"fields":{"rss-peak-kib":"2460"}}
{"frame":"begin","vm":"B","log":"passive-kernel-n20-r1","t":16.0,"fields":{"role":"passive","side":"kernel","out":"-","n":"20","round":"1"}}
{"frame":"note","vm":"B","msg":"A: done passive-kernel-n20-r1 rc=0","t":17.0}
`
	aLog = `{"frame":"begin","vm":"A","log":"passive-ibcm-qp-n20-r1","t":8.0}
step              total ms     max ms     min us  us / conn
connect      :      209.00     200.00    1000.00    1000.00
disconnect   :       76.30      70.00     500.00     500.00
failure: something
{"frame":"end","vm":"A","log":"passive-ibcm-qp-n20-r1","rc":0,"t":12.0,"fields":{"load":"1,1,1"}}
{"frame":"begin","vm":"A","log":"active-kernel-n20-r1","t":12.9}
{"frame":"end","vm":"A","log":"active-kernel-n20-r1","rc":143,"t":15.1}
`
)

func TestLoadReadsTheFramedRuns(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "b.log"), []byte(bLog), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a-cmtime.log"), []byte(aLog), 0o644))
	r, err := load(dir)
	require.NoError(t, err)
	assert.Equal(t, []float64{0.25}, r.switches["off"])
	assert.InDelta(t, 184000, r.consoleBytes, 0)
	assert.InDelta(t, 0.53, r.consoleSeconds, 1e-9)
	require.Len(t, r.runs, 3)

	p := r.runs[0]
	assert.Equal(t, "passive-ibcm-qp-n20-r1", p.tag)
	assert.Equal(t, []string{"passive", "ibcm", "qp", "1"}, []string{p.role, p.side, p.out, p.round})
	assert.Equal(t, 20, p.n)
	assert.Equal(t, 0, p.rc)
	assert.Equal(t, 0, p.clientRC, "VM A's client exit status, from its log of the tag")
	assert.Equal(t, 12276, p.rssKiB)
	assert.InDelta(t, 66, p.cpuBusy, 1e-9)
	assert.Equal(t, "7.1 7.2 7.3", p.load)
	assert.Equal(t, [2]int{9, 900}, [2]int{p.fileLines, p.fileBytes})
	assert.InDelta(t, 8.1, p.upBegin, 1e-9)
	assert.Equal(t, 2, p.events)
	assert.Equal(t, "PASS", p.result)
	assert.InDelta(t, 209, p.table["connect"][0], 1e-9, "the passive run's table is VM A's")
	assert.Equal(t, []string{"A: failure: something"}, p.errors)
	assert.False(t, p.ok, "an error line in VM A's log")

	a := r.runs[1]
	assert.InDelta(t, 861.53, a.table["connect"][0], 1e-9, "the active run's table is on VM B's console")
	assert.Equal(t, -1, a.clientRC, "the server's log in VM A gives no client status")
	assert.True(t, a.ok)

	k := r.runs[2]
	assert.Equal(t, -1, k.rc, "a run without its end record")
	assert.False(t, k.ok)
	assert.Empty(t, r.benchLines(), "benchstat compares only good runs, and none of ibcm's is")
	p.errors, p.ok, k.ok = nil, true, true
	assert.Equal(t, "BenchmarkCmtime/role=passive/n=20/ibcm=qp/side=ibcm 1 209 connect-ms 76.3 disconnect-ms\n"+
		"BenchmarkCmtime/role=passive/n=20/ibcm=qp/side=kernel 1 0 connect-ms 0 disconnect-ms\n", r.benchLines())
}
