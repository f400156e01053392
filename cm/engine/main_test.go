package engine

import (
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks, after every test of the package ran, that the tests hit
// every Transition and Stateless cell of the connection table and every
// Transition cell of the alternate-path table (the scenario scripts and
// unit tests record cells through RecordCell), and that no goroutine leaked.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 && flag.Lookup("test.run").Value.String() == "" && flag.Lookup("test.skip").Value.String() == "" {
		if missing := missingCells(); len(missing) > 0 {
			fmt.Printf("table coverage: %d cells never exercised:\n  %s\n", len(missing), strings.Join(missing, "\n  "))
			code = 1
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Println("goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// missingCells lists the Transition/Stateless cells no test exercised.
func missingCells() []string {
	cellHits.Lock()
	defer cellHits.Unlock()
	var out []string
	total, hit := 0, 0
	for s := State(0); s < NumStates; s++ {
		for e := Event(0); e < NumEvents; e++ {
			k := Lookup(s, e).Kind
			if k != KindTransition && k != KindStateless {
				continue
			}
			total++
			if n := cellHits.main[s][e]; n > 0 {
				hit++
				if testing.Verbose() {
					fmt.Printf("  hit %6d  %s/%s (%s)\n", n, s, e, k)
				}
				continue
			}
			out = append(out, fmt.Sprintf("%s/%s (%s)", s, e, k))
		}
	}
	for s := LAPState(0); s < NumLAPStates; s++ {
		for e := Event(0); e < NumEvents; e++ {
			if !e.LAP() || LookupLAP(s, e).Kind != KindTransition {
				continue
			}
			total++
			if n := cellHits.lap[s][e]; n > 0 {
				hit++
				if testing.Verbose() {
					fmt.Printf("  hit %6d  ESTABLISHED/%s/%s (LAP)\n", n, s, e)
				}
				continue
			}
			out = append(out, fmt.Sprintf("ESTABLISHED/%s/%s (LAP)", s, e))
		}
	}
	fmt.Printf("table coverage: %d/%d Transition and Stateless cells exercised\n", hit, total)
	return out
}
