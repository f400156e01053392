package main

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// unit reads a systemd unit's settings (the last of each key).
func unit(t *testing.T, path string) map[string]string {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	kv := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			kv[k] = v
		}
	}
	require.NoError(t, sc.Err())
	return kv
}

// The units and the binary agree: the socket the unit makes is the one
// ibcmd would make, of the group ExecStart names, and the service says
// READY itself.
func TestSystemdUnitsMatchTheBinary(t *testing.T) {
	sock := unit(t, "systemd/ibcmd.socket")
	svc := unit(t, "systemd/ibcmd.service")
	def, err := parse(nil, nil)
	require.NoError(t, err)
	assert.Equal(t, def.socket, sock["ListenSequentialPacket"], "SOCK_SEQPACKET, at the default path")
	assert.Equal(t, "0660", sock["SocketMode"])
	assert.Equal(t, "notify", svc["Type"])
	args := strings.Fields(svc["ExecStart"])
	require.NotEmpty(t, args)
	o, err := parse(args[1:], nil)
	require.NoError(t, err, "ExecStart's flags parse")
	assert.Equal(t, sock["SocketGroup"], o.group, "the daemon's group is the socket's")
	assert.Equal(t, "ibcmd.socket", svc["Requires"])
	assert.Equal(t, "char-infiniband_mad rw", svc["DeviceAllow"], "the umad devices, and no other")
}
