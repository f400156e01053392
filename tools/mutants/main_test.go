package main

import (
	"os"
	"path/filepath"
	"testing"
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

// TestConfigsExist: every config the tlc and deep layers run is in spec/,
// and runs against the module tools/model.sh would pick.
func TestConfigsExist(t *testing.T) {
	spec := filepath.Join("..", "..", "spec")
	want := map[string]string{"cm.cfg": "cm.tla", "cm_core.cfg": "cm.tla", "IndInvcm.cfg": "IndInvcm.tla"}
	for _, c := range append(append([]tlcConfig{}, tlcConfigs...), deepConfigs...) {
		if _, err := os.Stat(filepath.Join(spec, c.cfg)); err != nil {
			t.Error(err)
		}
		if m, ok := want[c.cfg]; ok && moduleOf(spec, c.cfg) != m {
			t.Errorf("%s runs against %s, want %s", c.cfg, moduleOf(spec, c.cfg), m)
		}
	}
}
