package verbs

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test left a goroutine behind: waits must
// end with their context or with Close.
func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Println("goroutine leak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
