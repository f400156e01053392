package engine

// TraceStep describes one table step of an Engine: one (state, event)
// lookup and what came of it. Trace validation against the TLA+ model uses
// Event, ID, From and To; table coverage uses Kind and the LAP fields.
type TraceStep struct {
	Time  Time
	Event Event
	ID    CommID // 0 for a stateless answer (the IDLE row)
	From  State
	To    State
	Kind  Kind // of the main-table cell; KindSub when the alternate-path table decided
	// Sent is the number of MADs the step queued: the last Sent of the
	// messages the next Ready returns, in order (an input's steps queue
	// theirs one after the other).
	Sent int
	// The alternate-path sub-step, when Kind is KindSub.
	LAPFrom LAPState
	LAPTo   LAPState
	LAPKind Kind
}

// Tracer is called once per table step, synchronously, after the step.
// It must not call back into the Engine.
type Tracer func(TraceStep)
