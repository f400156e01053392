package interop

import "strings"

// RpingTeardownRace reports whether l is rdma-core 44's rping client
// (rping -c -v -V -C pings) that did everything it was asked and then lost
// the race in its own teardown: its CM thread, having handled DISCONNECTED
// and acked it, calls rdma_get_cm_event again, and when main has meanwhile
// destroyed the event channel that read fails with EBADF and the thread
// calls exit(-1). rping's main thread waits for the event's ack
// (rdma_destroy_id) but not for the thread, so the exit status says which
// of the two ran first, not how the connection went.
//
// The window is the DREP's round trip: the client's rdma_disconnect sends
// the DREQ and goes on to free its QP and id, and DISCONNECTED comes with
// the DREP. A kernel peer answers with the DREP only when its program
// disconnects too, mostly after the client has destroyed its id (no event
// then, no race); a peer on ibcm answers at once, in the middle of the
// client's teardown.
//
// Only that end is recognised: exit status 255, exactly pings verified
// ping lines, the DISCONNECTED line and then the one failed read, and no
// other line (a mismatch, a failed completion or a failed client prints
// its own).
func RpingTeardownRace(l *Log, pings int) bool {
	if !l.Ended || l.RC == nil || *l.RC != 255 {
		return false
	}
	n, disconnected, read := 0, false, false
	for _, line := range l.Lines {
		switch {
		case strings.HasPrefix(line, "ping data: rdma-ping-"):
			n++
		case line == "client DISCONNECT EVENT..." && !disconnected && !read:
			disconnected = true
		case line == "rdma_get_cm_event: Bad file descriptor" && disconnected && !read:
			read = true
		default:
			return false
		}
	}
	return n == pings && read
}
