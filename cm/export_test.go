package cm

import (
	"context"

	"github.com/ibcm/ibcm/cm/engine"
)

// HeldIDs returns every id the Manager's engine holds (listens included),
// read on the loop goroutine, or directly once the loop has stopped. Tests
// use it to check that no call or MAD leaves an id behind.
func HeldIDs(m *Manager) []engine.IDInfo {
	var out []engine.IDInfo
	collect := func() {
		for in := range m.eng.IDs() {
			out = append(out, in)
		}
	}
	if m.do(context.Background(), collect) != nil {
		<-m.done
		out = out[:0]
		collect()
	}
	return out
}
