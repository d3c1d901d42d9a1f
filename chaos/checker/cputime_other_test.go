//go:build !unix

package checker

import "time"

var start = time.Now()

// cpuTime returns the wall time since the tests started, where the CPU time
// of the process is not to be had.
func cpuTime() time.Duration { return time.Since(start) }
