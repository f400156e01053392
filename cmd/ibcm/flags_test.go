package main

import (
	"flag"
	"io"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every flag of the groups has its one definition, the groups cover every
// definition, and a flag's default is the command's (newNetOpts).
func TestNetFlagDefs(t *testing.T) {
	all := slices.Concat(portFlags, daemonFlags, serviceFlags, targetFlags, reqFlags, peerFlags, runFlags, []string{"sidr-port", "sidr-sid"})
	for name := range netFlagDefs {
		assert.Contains(t, all, name)
	}
	fs := flag.NewFlagSet("all", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	newNetOpts("listen").register(fs, [][]string{all}...)
	for _, name := range all {
		require.NotNil(t, fs.Lookup(name), name)
	}
	assert.Equal(t, "-1ns", fs.Lookup("hold").DefValue)
	assert.Equal(t, "umad", fs.Lookup("transport").DefValue)

	o := newNetOpts("cmtime")
	var c cmtimeOpts
	cfs := cmtimeFlags(&c, io.Discard)
	require.NoError(t, cfs.Parse([]string{"-c", "7", "-p", "9000", "-s", "10.0.0.1"}))
	assert.Equal(t, 7, c.net.Count)
	assert.EqualValues(t, 9000, c.net.TCPPort)
	assert.Equal(t, "10.0.0.1", c.net.DstIP)
	assert.Equal(t, o.MTU, c.net.MTU)
	assert.Zero(t, c.net.AckTimeout, "the same default as connect's: the port's")
}
