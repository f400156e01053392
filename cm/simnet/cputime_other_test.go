//go:build !unix

package simnet

import "time"

func cpuTime() time.Duration { return 0 }
