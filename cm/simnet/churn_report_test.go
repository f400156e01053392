package simnet

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChurnConfigCheck(t *testing.T) {
	assert.NoError(t, (&ChurnConfig{}).Check(), "zero values are the defaults")
	assert.NoError(t, (&ChurnConfig{Nodes: 1, Loopback: true}).Check())
	for _, c := range []ChurnConfig{{Loss: 1.5}, {Dup: -0.1}, {Nodes: 1}, {Conns: -1}, {Parallel: -1}} {
		assert.Error(t, c.Check(), "%+v", c)
	}
}

func TestChurnReport(t *testing.T) {
	cfg := ChurnConfig{Conns: 20, Seed: 7, LegacyTimeWaitQPN: true}
	res, err := Churn(cfg)
	require.NoError(t, err)
	res.RejectedByReason = map[string]int{"28": 1, "10": 2}
	r := NewChurnReport(cfg, res, 2*time.Second)
	assert.Equal(t, float64(res.Established)/2, r.ConnsPerSecond)
	var b strings.Builder
	require.NoError(t, r.WriteText(&b))
	assert.Contains(t, b.String(), "seed 7, legacy TimeWait QPN")
	assert.Less(t, strings.Index(b.String(), "rejected (10 "), strings.Index(b.String(), "rejected (28 "))
}
