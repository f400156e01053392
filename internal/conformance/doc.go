// Package conformance holds the engine to the TLA+ model, both ways. Trace
// validation maps each step of a running engine to the spec's state
// (mapping, totla) and has TLC check the trace against spec/Tracecm.tla;
// model-based testing reads a state graph TLC dumped of a small
// configuration (graph, dot) and replays every edge of it on engines
// (replay), with the timers and messages the edge asks for. Together they
// say that the generated engine and the spec's Table are the same machine,
// beyond what the generator alone guarantees.
package conformance
