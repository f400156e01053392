package cm

import "context"

// DueLen is the number of deadline entries the Manager holds beside the
// engine's timers (MRAs on the application's behalf, SIDR_REQs that lapse
// unanswered), every entry it keeps counted, read on the loop goroutine (or
// directly once the Manager has stopped).
func DueLen(m *Manager) int {
	n := 0
	count := func() { n = len(m.mra.h) + len(m.sidrDue.h) }
	if m.do(context.Background(), count) != nil {
		<-m.done
		count()
	}
	return n
}
