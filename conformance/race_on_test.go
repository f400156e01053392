//go:build race

package conformance

// raceEnabled: the race detector slows the graph replay about tenfold.
const raceEnabled = true
