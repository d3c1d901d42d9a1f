package chaos_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
)

// The hunt runs on docker nodes that are each a primary with a replica:
// its restarts without data and clock jumps act on the pairs' primaries,
// in the containers they have, and none fails. The seed is the first whose
// schedule has both within the run (a short run has few episodes).
func TestHuntOnReplicatedDocker(t *testing.T) {
	testenv.RequireDocker(t)
	want := []fault.Kind{fault.RestartWithoutData, fault.ClockSkew}
	cfg := chaos.Config{Nodes: 3, Clients: 3, Duration: replicatedRunLimit, Backend: "docker", Replicas: true,
		Profile: chaos.ProfileHunt}
	found := false
	for seed := uint64(1); seed <= 100 && !found; seed++ {
		cfg.Seed = seed
		plan, err := chaos.Schedule(cfg)
		if err != nil {
			t.Fatal(err)
		}
		done := map[fault.Kind]bool{}
		for _, s := range plan.Steps {
			if s.At+s.For < cfg.Duration {
				done[s.Kind] = true
			}
		}
		found = done[want[0]] && done[want[1]]
	}
	if !found {
		t.Fatalf("no seed up to 100 schedules %v within %v", want, cfg.Duration)
	}
	t0 := time.Now()
	run, err := chaos.Run(t.Context(), cfg)
	if errors.Is(err, docker.ErrNoImage) {
		testenv.SkipOrFail(t, "docker works, but: %v\nbuild the image with scripts/redis-image.sh (make image)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: ran in %v (workload %v), verdict %s", cfg.Seed, time.Since(t0), cfg.Duration, run.Result.Verdict)
	for _, f := range run.Result.FailedFaults {
		t.Errorf("%s on node %d at %v failed: %s", f.Kind, f.Node, f.Start, f.Err)
	}
	n := map[fault.Kind]int{}
	for _, f := range run.Result.Faults {
		n[f.Kind]++
	}
	t.Logf("faults injected: %v", n)
	for _, k := range want {
		if n[k] == 0 {
			t.Errorf("no %s injected", k)
		}
	}
	if !run.Result.StoreChecked || !run.Result.StoreCorrect {
		t.Errorf("the fenced store is not correct (checked %v)", run.Result.StoreChecked)
	}
}
