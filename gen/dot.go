package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/ibcm/ibcm/gen/def"
)

// emitDOT draws every state-changing transition; events that lead from the
// same state to the same state share one edge.
func emitDOT(t *def.Table) ([]byte, error) {
	var b bytes.Buffer
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	w("// %s\n", header)
	w("digraph cm {\n")
	w("  rankdir=TB; newrank=true; nodesep=0.35; ranksep=0.45;\n")
	w("  node [shape=box, style=\"rounded,filled\", fillcolor=\"#eef3fb\", fontname=\"Helvetica\", fontsize=11];\n")
	w("  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];\n")
	for _, s := range def.States {
		extra := ""
		switch {
		case s.TimeWait:
			extra = ", fillcolor=\"#fde2c8\""
		case s.Connected:
			extra = ", fillcolor=\"#d9f2d9\""
		}
		w("  %s [tooltip=%q%s];\n", s.Name, s.Doc, extra)
	}
	edges := func(tab [][]def.Entry, names func(int) string, prefix string) {
		for si := range tab {
			var order []string
			labels := map[string][]string{}
			for ei, ev := range def.Events {
				e := tab[si][ei]
				if e.Kind != def.Transition || e.Next == names(si) {
					continue
				}
				if _, ok := labels[e.Next]; !ok {
					order = append(order, e.Next)
				}
				labels[e.Next] = append(labels[e.Next], ev.Name)
			}
			for _, to := range order {
				// Event names are identifiers: the label needs no escaping but
				// its line breaks, which DOT writes as \n inside the quotes.
				w("  %s%s -> %s%s [label=\"%s\"];\n", prefix, names(si), prefix, to, strings.Join(labels[to], `\n`))
			}
		}
	}
	edges(t.Main, func(i int) string { return def.States[i].Name }, "")
	w("  subgraph cluster_lap {\n    label=\"ESTABLISHED: alternate path\"; fontname=\"Helvetica\"; style=dashed;\n")
	for _, s := range def.LAPStates {
		w("    %s [tooltip=%q, fillcolor=\"#f3eefb\"];\n", s.Name, s.Doc)
	}
	edges(t.LAP, func(i int) string { return def.LAPStates[i].Name }, "")
	w("  }\n")
	w("  ESTABLISHED -> LAP_UNINIT [style=dotted, arrowhead=none, label=\"sub-state\"];\n")
	w("}\n")
	return b.Bytes(), nil
}
