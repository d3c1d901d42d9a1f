package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
)

// timing is the TTL and node timeout of the short runs on a backend, from
// how fast this machine is now: twice the first of 300ms and 50ms, then
// twice, four and eight times that, under which a 3s calibration run with
// no faults (the short runs' nodes and clients) gets at least 30
// acquisitions (faults add load, and a run that barely works without them
// collapses with them), or else the one that got the most, if at least 10. Too short a
// node timeout does not only fail some calls: each timeout closes a
// connection, the redials load the machine further, and the run collapses.
// On a 2-core machine at a load of 14, under -race, 50ms failed every
// acquisition of a 5s run, while 100ms made 33 in 4s; the containers' network
// is slower than the process backend's loopback.
type timing struct {
	ttl, nodeTimeout time.Duration
	err              error
}

var calibrations sync.Map // backend name -> func() timing

func calibrate(backendName string) timing {
	const d, enough, least = 3 * time.Second, 30, 10
	var got []string
	best := timing{err: errors.New("no calibration run")}
	most := 0
	for ttl, nt := 300*time.Millisecond, 50*time.Millisecond; nt <= 800*time.Millisecond; ttl, nt = 2*ttl, 2*nt {
		run, err := chaos.Run(context.Background(), chaos.Config{
			Nodes: 5, Clients: 6, Duration: d, Faults: []fault.Kind{}, Seed: 1, TTL: ttl, NodeTimeout: nt,
			Backend: backendName,
		})
		if err != nil {
			return timing{err: err}
		}
		n := run.Result.Acquisitions
		if n >= enough {
			// One step of margin: the load moves between the calibration
			// and the runs (other packages' tests start and stop), and a
			// timing that only just worked without faults collapses under
			// them (seen: 0 acquisitions in 3s at 300ms/50ms, and in 12s
			// on containers at 1.2s/200ms, right after a calibration that
			// had passed).
			return timing{ttl: 2 * ttl, nodeTimeout: 2 * nt}
		}
		if n > most {
			best, most = timing{ttl: ttl, nodeTimeout: nt}, n
		}
		got = append(got, fmt.Sprintf("%d with a %v node timeout", n, nt))
	}
	if most >= least { // a loaded machine: the best there was
		return best
	}
	return timing{err: fmt.Errorf("fewer than %d acquisitions in %v with no faults on %s: %s",
		least, d, backendName, strings.Join(got, ", "))}
}

// shortTiming returns the timing of backendName, calibrated once per test
// binary; it fails t if calibration did, and skips or fails it (see
// testenv.SkipOrFail) when the docker backend has no image.
func shortTiming(t *testing.T, backendName string) (ttl, nodeTimeout time.Duration) {
	t.Helper()
	once, _ := calibrations.LoadOrStore(backendName, sync.OnceValue(func() timing { return calibrate(backendName) }))
	tm := once.(func() timing)()
	if errors.Is(tm.err, docker.ErrNoImage) {
		testenv.SkipOrFail(t, "docker works, but: %v\nbuild the image with scripts/redis-image.sh (make image)", tm.err)
	}
	if tm.err != nil {
		t.Fatalf("calibration run: %v", tm.err)
	}
	return tm.ttl, tm.nodeTimeout
}
