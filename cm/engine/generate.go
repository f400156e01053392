package engine

// The transition tables, the TLA+ table module and the state diagram all come
// from gen/def. The SVG is rendered by Debian's graphviz.
//go:generate go run ../../gen -root ../..
//go:generate dot -Tsvg -o ../../docs/cm-states.svg ../../docs/cm-states.dot
