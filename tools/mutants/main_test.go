package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCatalogueApplies: every mutant's edit still matches the code it
// breaks, so an edit of gen/def or the engine that moves a mutated line
// fails here (make unit) instead of in the next make mutants.
func TestCatalogueApplies(t *testing.T) {
	root := filepath.Join("..", "..")
	names := map[string]bool{}
	defs := 0
	for _, m := range catalogue {
		if names[m.Name] {
			t.Errorf("%s: two mutants of that name", m.Name)
		}
		names[m.Name] = true
		if m.def() {
			defs++
		}
		if err := m.applies(root); err != nil {
			t.Error(err)
		}
	}
	// The issue asks for at least 15 mutants, of the definition and of the
	// hand-written code both.
	if len(catalogue) < 15 || defs == 0 || defs == len(catalogue) {
		t.Errorf("%d mutants, %d of gen/def: want at least 15, of both kinds", len(catalogue), defs)
	}
}

// TestConfigsExist: every config the tlc, complete and indinv layers run
// is in spec/, and runs against the module tools/model.sh would pick.
func TestConfigsExist(t *testing.T) {
	spec := filepath.Join("..", "..", "spec")
	want := map[string]string{"cm.cfg": "cm.tla", "cm_core.cfg": "cm.tla", "cm_stale.cfg": "cm.tla", "cm_unlisted.cfg": "cm.tla", "cm_silent.cfg": "cm.tla", "IndInvcm.cfg": "IndInvcm.tla"}
	for _, c := range slices.Concat(tlcConfigs, completeConfigs, indinvConfigs) {
		if _, err := os.Stat(filepath.Join(spec, c.cfg)); err != nil {
			t.Error(err)
		}
		if m, ok := want[c.cfg]; ok && moduleOf(spec, c.cfg) != m {
			t.Errorf("%s runs against %s, want %s", c.cfg, moduleOf(spec, c.cfg), m)
		}
	}
}

// TestDeepEscapesNamed: every mutant deepEscapes excuses is in the
// catalogue and mutates the definition (an engine mutant is n/a at every
// depth anyway).
func TestDeepEscapesNamed(t *testing.T) {
	for name := range deepEscapes {
		i := slices.IndexFunc(catalogue, func(m mutant) bool { return m.Name == name })
		assert.True(t, i >= 0 && catalogue[i].def(), "deepEscapes names %s, which is not a mutant of gen/def in the catalogue", name)
	}
}

// TestVerdict: the rules a run enforces. A mutant of the definition that
// only a bounded check caught fails; one that deepEscapes excuses passes
// uncaught at every depth, and fails if it is caught there after all.
func TestVerdict(t *testing.T) {
	all := map[string]bool{}
	for _, l := range layerNames {
		all[l] = true
	}
	def := mutant{Name: "some-def-mutant", File: "gen/def/cm.go"}
	engine := mutant{Name: "some-engine-mutant", File: "cm/engine/engine.go"}
	caught, passed := result{caught: true}, result{}
	for _, c := range []struct {
		name  string
		m     mutant
		res   map[string]result
		fails int
	}{
		{"caught everywhere", def, map[string]result{"tlc": caught, "complete": caught, "indinv": passed, "pbt": caught}, 0},
		{"bounded only", def, map[string]result{"tlc": caught, "complete": passed, "indinv": passed, "pbt": caught}, 1},
		{"nothing", def, map[string]result{"tlc": passed, "complete": passed, "indinv": passed, "pbt": passed}, 2},
		{"indinv only", def, map[string]result{"tlc": passed, "complete": passed, "indinv": caught, "pbt": caught}, 0},
		{"deep timed out", def, map[string]result{"tlc": caught, "complete": {timedOut: true, detail: "timed out on cm_core.cfg"}, "indinv": passed, "pbt": caught}, 2},
		{"engine, pbt", engine, map[string]result{"pbt": caught}, 0},
		{"engine, nothing", engine, map[string]result{"pbt": passed}, 1},
		{"excused, uncaught", mutant{Name: "mra-no-extend", File: "gen/def/cm.go"},
			map[string]result{"tlc": passed, "complete": passed, "indinv": passed, "pbt": caught}, 0},
		{"excused, caught", mutant{Name: "mra-no-extend", File: "gen/def/cm.go"},
			map[string]result{"tlc": passed, "complete": caught, "indinv": passed, "pbt": caught}, 1},
	} {
		assert.Len(t, verdict(c.m, c.res, all), c.fails, c.name)
	}
}
