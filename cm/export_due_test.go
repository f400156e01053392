package cm

// DueLen is the number of deadline entries the Manager holds beside the
// engine's timers (MRAs on the application's behalf, SIDR_REQs that lapse
// unanswered), every entry it keeps counted, read under the lock.
func DueLen(m *Manager) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mra.len() + m.sidrDue.len()
}
