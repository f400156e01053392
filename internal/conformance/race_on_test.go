//go:build race

package conformance

// raceEnabled: the race detector slows the graph replay about threefold
// (cm_graph.cfg: 24 s instead of 7.5 s), so make unit replays one graph.
const raceEnabled = true
