package cm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/ibcm/ibcm/cm/engine"
)

// The hooks of the API property test and FuzzManager. Each is bounded by
// its context: a Manager whose lock is never let go makes the hook fail
// (the test reports it) instead of hanging the test.

// HeldIDsWithin is HeldIDs bounded by ctx.
func HeldIDsWithin(ctx context.Context, m *Manager) ([]engine.IDInfo, error) {
	if m.dialed() {
		return HeldIDsWithin(ctx, backing(m))
	}
	if err := lockWithin(ctx, m); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	var out []engine.IDInfo
	for in := range m.eng.IDs() {
		out = append(out, in)
	}
	return out, nil
}

// Quiet reports whether the Manager has nothing left to do until a MAD
// arrives or a timer fires: no received MAD waiting or being handled,
// nothing queued for the sender or being sent, no engine output or
// callback not yet run, no deadline due. A closed Manager is quiet once
// its callbacks have run.
func Quiet(ctx context.Context, m *Manager) (bool, error) {
	why, err := Busy(ctx, m)
	return err == nil && why == "", err
}

// Busy says what keeps the Manager from being quiet (Quiet), or "" when
// it is: for a test that fails on a Manager that does not go quiet.
func Busy(ctx context.Context, m *Manager) (string, error) {
	if m.dialed() {
		q, err := quietDialed(ctx, m)
		if err != nil || q {
			return "", err
		}
		return "dialed, not quiet", nil
	}
	if err := lockWithin(ctx, m); err != nil {
		return "", err
	}
	defer m.mu.Unlock()
	// A callback is handled once it has run, not once the deliverer has
	// taken it off m.effects: until then the channel it closes (a
	// TimeWaitExit behind its TIMEWAIT-EXIT) may still be open.
	m.tellMu.Lock()
	told := m.told
	m.tellMu.Unlock()
	var why []string
	if told != m.queued {
		why = append(why, fmt.Sprintf("%d of %d callbacks run", told, m.queued))
	}
	if m.closed {
		return strings.Join(why, ", "), nil
	}
	if d, ok := m.deadline(); ok && d <= m.clock.Now() {
		why = append(why, "a deadline is due: its tick has yet to run")
	}
	if n := len(m.incoming); n > 0 {
		why = append(why, fmt.Sprintf("%d received MADs waiting", n))
	}
	if m.receiving.Load() {
		why = append(why, "a received MAD being handled")
	}
	if !m.sendq.quiet() {
		why = append(why, "MADs queued or being sent")
	}
	if m.eng.HasReady() {
		why = append(why, "engine output not handled")
	}
	return strings.Join(why, ", "), nil
}

// lockWithin takes the Manager's lock, or fails when ctx ends first.
func lockWithin(ctx context.Context, m *Manager) error {
	for !m.mu.TryLock() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Microsecond):
		}
	}
	return nil
}

// backings holds the daemon's Manager behind each dialed Manager the
// tests make (SetBacking): the hooks read its ids and its quiet.
var backings sync.Map

// SetBacking records daemon as the Manager that serves the dialed m.
func SetBacking(m, daemon *Manager) { backings.Store(m, daemon) }

func backing(m *Manager) *Manager {
	d, _ := backings.Load(m)
	b, _ := d.(*Manager)
	return b
}

// quietDialed is Quiet of a dialed Manager: the daemon's Manager is
// quiet, every event it told has reached the client (a reply written
// after them has come back) and been told to OnEvent.
func quietDialed(ctx context.Context, m *Manager) (bool, error) {
	if m.isClosed() {
		return true, nil
	}
	if q, err := Quiet(ctx, backing(m)); err != nil || !q {
		return q, err
	}
	if _, err := m.remote.ops.do(ctx, &remoteCall{op: ropStats}); err != nil {
		if m.isClosed() {
			return true, nil
		}
		return false, err
	}
	if err := lockWithin(ctx, m); err != nil {
		return false, err
	}
	defer m.mu.Unlock()
	return len(m.effects) == 0, nil
}
