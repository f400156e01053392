package pbt

import (
	"fmt"

	"github.com/ibcm/ibcm/cm/engine"
)

// The liveness counterparts, checked by Finish at the end of a sequence.
// spec/cm.tla states them under
//
//	\* The application answers, timers fire, TimeWait ends.
//	Fairness ==
//	    /\ \A n \in Nodes, h \in Handles :
//	          /\ WF_vars(Accept(n, h)) /\ WF_vars(SendRTU(n, h)) /\ WF_vars(SendDREP(n, h))
//	          /\ WF_vars(Timeout(n, h)) /\ WF_vars(TimeoutFinal(n, h)) /\ WF_vars(TimeWaitExpiry(n, h))
//
// as
//
//	AttemptsEnd == \A n \in Nodes, h \in Handles :
//	    conn[n][h].state \in AttemptStates ~> conn[n][h].state \in {"ESTABLISHED", "IDLE"}
//
//	TimeWaitEnds == \A n \in Nodes, h \in Handles :
//	    conn[n][h].state = "TIMEWAIT" ~> conn[n][h].state = "IDLE"
//
// Finish makes the rest of the behaviour fair: no more faults, every
// pending message is delivered, the application answers everything it is
// asked (Accept, SendRTU, SendDREP, and the APR and SIDR_REP the spec's
// model leaves out), and time advances past every deadline, until nothing
// is left to do. Then every id that was attempting must have reached
// ESTABLISHED or IDLE (AttemptsEnd), every id that was in TimeWait must be
// gone and the TimeWait lists empty (TimeWaitEnds), and every id left is a
// listen or an established connection (Quiescent). Finally the
// application disconnects everything, settles again, and every table must
// be empty but the listens; destroying those leaves nothing at all
// (ClosedTablesEmpty).

// isAttempt is spec/cm.tla's AttemptStates (generated: State.Attr().Attempt).
func isAttempt(s engine.State) bool { return s.Attr().Attempt }

type watched struct {
	node  int
	id    engine.CommID
	state engine.State
}

func (s *System) finish() (string, error) {
	var attempts, timeWait []watched
	for i, n := range s.Nodes {
		clear(s.per[i].reached)
		for id := range n.Engine.IDs() {
			switch {
			case isAttempt(id.State):
				attempts = append(attempts, watched{i, id.ID, id.State})
			case id.State == engine.StateTimeWait:
				timeWait = append(timeWait, watched{i, id.ID, id.State})
			}
		}
	}
	s.watch = true
	steps, err := s.settle()
	s.watch = false
	if err != nil {
		return "", err
	}
	for _, w := range attempts {
		if !s.per[w.node].reached[w.id] {
			now, _ := s.Nodes[w.node].Engine.Info(w.id)
			return "", fmt.Errorf("AttemptsEnd: %s %s was in %s; after a fair settle it is in %s and never reached ESTABLISHED or IDLE",
				s.Nodes[w.node].Name, w.id, w.state, now.State)
		}
	}
	for _, w := range timeWait {
		if now, ok := s.Nodes[w.node].Engine.Info(w.id); ok {
			return "", fmt.Errorf("TimeWaitEnds: %s %s was in TIMEWAIT; after a fair settle it is in %s", s.Nodes[w.node].Name, w.id, now.State)
		}
	}
	for _, n := range s.Nodes {
		if l := n.Engine.TimeWaitLen(); l != 0 {
			return "", fmt.Errorf("TimeWaitEnds: %s: %d ids still on the TimeWait list after a fair settle", n.Name, l)
		}
		for id := range n.Engine.IDs() {
			if id.State != engine.StateListen && id.State != engine.StateEstablished {
				//lint:ignore ST1005 a property failure starts with the property's name, as Invariant reads it
				return "", fmt.Errorf("Quiescent: %s %s is in %s/%s after a fair settle", n.Name, id.ID, id.State, id.LAP)
			}
		}
	}
	// Close everything.
	for i, n := range s.Nodes {
		for id := range n.Engine.IDs() {
			if id.State == engine.StateEstablished {
				s.logf("    close: Disconnect %s", s.idName(target{i, id}))
				if err := n.Engine.Disconnect(s.now(), id.ID, nil); err != nil {
					return "", fmt.Errorf("AppCallsFollowTable: Disconnect %s %s: %w", NodeName(i), id.ID, err)
				}
			}
		}
	}
	s.Sim.Flush()
	more, err := s.settle()
	if err != nil {
		return "", err
	}
	for _, n := range s.Nodes {
		e := n.Engine
		var listens []engine.CommID
		for id := range e.IDs() {
			if id.State != engine.StateListen {
				return "", fmt.Errorf("ClosedTablesEmpty: %s %s is in %s after everything was disconnected", n.Name, id.ID, id.State)
			}
			listens = append(listens, id.ID)
		}
		for k := range e.RemoteIDTable() {
			return "", fmt.Errorf("ClosedTablesEmpty: %s: remote-ID entry %+v left", n.Name, k)
		}
		for k := range e.RemoteQPNTable() {
			return "", fmt.Errorf("ClosedTablesEmpty: %s: remote-QPN entry %+v left", n.Name, k)
		}
		for k := range e.SIDRTable() {
			return "", fmt.Errorf("ClosedTablesEmpty: %s: SIDR entry %+v left", n.Name, k)
		}
		if e.TimeWaitLen() != 0 || e.HalfOpen() != 0 {
			return "", fmt.Errorf("ClosedTablesEmpty: %s: TimeWait %d, half open %d", n.Name, e.TimeWaitLen(), e.HalfOpen())
		}
		if _, armed := e.Deadline(); armed {
			return "", fmt.Errorf("ClosedTablesEmpty: %s: a timer still runs", n.Name)
		}
		for _, id := range listens {
			if err := e.Destroy(s.now(), id); err != nil {
				return "", fmt.Errorf("AppCallsFollowTable: Destroy listen %s: %w", id, err)
			}
		}
		if e.NumIDs() != 0 {
			return "", fmt.Errorf("ClosedTablesEmpty: %s: %d ids left after destroying the listens", n.Name, e.NumIDs())
		}
		for k := range e.ListenTable() {
			return "", fmt.Errorf("ClosedTablesEmpty: %s: listen entry %+v left", n.Name, k)
		}
	}
	s.Sim.Flush()
	if p := len(s.Sim.Pending()); p != 0 {
		return "", fmt.Errorf("ClosedTablesEmpty: destroying the listens sent %d messages", p)
	}
	if !s.verbose() {
		return "", nil
	}
	return fmt.Sprintf("settled in %d steps, closed in %d, t=%s", steps, more, s.now()), nil
}

// settle runs the fair rest of a behaviour until nothing is left to do:
// the application answers, then pending messages are delivered oldest
// first, then time advances to the next deadline. The invariants are
// checked after every step.
func (s *System) settle() (int, error) {
	for step := 0; ; step++ {
		if step == settleBound {
			//lint:ignore ST1005 a property failure starts with the property's name, as Invariant reads it
			return step, fmt.Errorf("Quiescent: still busy after %d fair steps", settleBound)
		}
		answered, err := s.answer()
		switch {
		case err != nil:
			return step, err
		case answered != "":
			s.logf("    fair: %s", answered)
		case len(s.Sim.Pending()) > 0:
			if s.verbose() {
				s.logf("    fair: deliver %s", s.describe(s.Sim.Pending()[0]))
			}
			s.deliver(0)
		default:
			t, ok := s.Sim.NextEvent()
			if !ok {
				return step, nil
			}
			s.Sim.RunUntil(t)
			s.logf("    fair: advance to t=%s", t)
		}
		s.Sim.Flush()
		if err := s.check(); err != nil {
			return step, err
		}
	}
}

// answer makes the first application answer some id awaits, if any, and
// says which.
func (s *System) answer() (string, error) {
	for i, n := range s.Nodes {
		for id := range n.Engine.IDs() {
			var ev engine.Event
			switch {
			case id.State == engine.StateReqRcvd || id.State == engine.StateMraReqSent:
				ev = engine.EvAccept
			case id.State == engine.StateRepRcvd || id.State == engine.StateMraRepSent:
				ev = engine.EvSendRTU
			case id.State == engine.StateDreqRcvd:
				ev = engine.EvSendDREP
			case id.State == engine.StateSidrReqRcvd:
				ev = engine.EvSIDRReply
			case id.State == engine.StateEstablished && (id.LAP == engine.LAPRcvd || id.LAP == engine.LAPMraSent):
				ev = engine.EvAnswerLAP
			default:
				continue
			}
			desc := s.idName(target{i, id})
			if err := s.call(target{i, id}, ev, 0, nil); err != nil {
				return "", fmt.Errorf("AppCallsFollowTable: fair %s on %s %s in %s: %w", ev, n.Name, id.ID, id.State, err)
			}
			return ev.String() + " " + desc, nil
		}
	}
	return "", nil
}
