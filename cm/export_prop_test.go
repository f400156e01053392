package cm

import (
	"context"
	"errors"

	"github.com/ibcm/ibcm/cm/engine"
)

// The hooks of the API property test and FuzzManager. Each is bounded by
// its context: a Manager whose loop is stuck makes the hook fail (the test
// reports it) instead of hanging the test.

// HeldIDsWithin is HeldIDs bounded by ctx.
func HeldIDsWithin(ctx context.Context, m *Manager) ([]engine.IDInfo, error) {
	var out []engine.IDInfo
	collect := func() {
		out = out[:0]
		for in := range m.eng.IDs() {
			out = append(out, in)
		}
	}
	if err := m.do(ctx, collect); err != nil {
		if !errors.Is(err, ErrClosed) {
			return nil, err
		}
		select {
		case <-m.done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		collect()
	}
	return out, nil
}

// Quiet reports whether the Manager has nothing left to do until a MAD
// arrives or a timer fires: no received MAD waiting, nothing queued for the
// sender, no engine output not yet handled. A closed Manager is quiet.
func Quiet(ctx context.Context, m *Manager) (bool, error) {
	var q bool
	err := m.do(ctx, func() { q = len(m.recv) == 0 && len(m.out) == 0 && !m.eng.HasReady() })
	if errors.Is(err, ErrClosed) {
		return true, nil
	}
	return q, err
}
