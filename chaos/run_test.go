package chaos_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
	"github.com/fencedlock/fencedlock/chaos/report"
)

// short runs one fault kind for a few seconds with a short TTL, so that
// many holds and several faults fit.
func short(t *testing.T, faults ...fault.Kind) history.Result {
	t.Helper()
	return shortOn(t, "process", faults...)
}

// shortOn is short on the named backend.
func shortOn(t *testing.T, backendName string, faults ...fault.Kind) history.Result {
	t.Helper()
	run, err := chaos.Run(t.Context(), chaos.Config{
		Nodes: 5, Clients: 6, Duration: 3 * time.Second, Faults: faults, Seed: 7,
		TTL: 300 * time.Millisecond, NodeTimeout: 50 * time.Millisecond, Backend: backendName,
	})
	if backendName == "docker" && errors.Is(err, backend.ErrNoImage) {
		testenv.SkipOrFail(t, "docker works, but: %v\nbuild the image with scripts/redis-image.sh (make image)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	res := run.Result
	t.Logf("%s: %d acquisitions, %d failed, faults %v, found %+v, expected %+v, stale rejected %d, longest stall %v",
		faults, res.Acquisitions, res.AcquireFailures, len(res.Faults), res.Found, res.Expected,
		res.StaleWritesRejected, res.Liveness.LongestStall)
	if res.Acquisitions < 10 {
		t.Fatalf("only %d acquisitions in 3s", res.Acquisitions)
	}
	if !res.StoreChecked || !res.StoreCorrect {
		t.Fatalf("store not correct: %+v", res.Found)
	}
	return res
}

func TestToleratedFaults(t *testing.T) {
	for _, f := range fault.Tolerated() {
		t.Run(string(f), func(t *testing.T) {
			res := short(t, f)
			if res.Verdict != history.VerdictOK {
				t.Fatalf("verdict %s: %s; violations %+v", res.Verdict, res.Reason, res.Violations)
			}
			if n := res.Found.Total(); n != 0 {
				t.Fatalf("%d violations under %s, a fault the lock tolerates: %+v", n, f, res.Violations)
			}
			if len(res.Faults) == 0 {
				t.Fatalf("no %s fault was injected", f)
			}
		})
	}
}

func TestAssumptionBreakingFaults(t *testing.T) {
	for _, tc := range []struct {
		fault      fault.Kind
		mustBreak  bool // mutual exclusion reliably breaks within the run
		mustReject bool // and the store reliably rejects stale writes
	}{
		{fault.ClientPause, true, true},
		{fault.ClientClockSkew, true, true},
		{fault.ClockSkew, false, false},
		{fault.RestartWithoutData, false, false},
	} {
		t.Run(string(tc.fault), func(t *testing.T) {
			res := short(t, tc.fault)
			if n := res.Unexpected().Total(); n != 0 {
				t.Fatalf("%d violations not explained by %s: %+v", n, tc.fault, res.Violations)
			}
			if tc.mustBreak && res.Expected.MutualExclusion == 0 {
				t.Fatalf("%s never broke mutual exclusion: the fault did not bite", tc.fault)
			}
			if tc.mustReject && res.StaleWritesRejected == 0 {
				t.Fatalf("%s: no stale write was rejected: fencing was not exercised", tc.fault)
			}
		})
	}
}

func TestBadConfig(t *testing.T) {
	for _, cfg := range []chaos.Config{
		{Nodes: -1},
		{Clients: 1000},
		{Duration: time.Millisecond},
		{Faults: []fault.Kind{"meteor"}},
		{Backend: "vm"},
		{TTL: 100 * time.Millisecond, NodeTimeout: 80 * time.Millisecond},
	} {
		if _, err := chaos.Run(t.Context(), cfg); !errors.Is(err, chaos.ErrConfig) {
			t.Errorf("Run(%+v): %v, want ErrConfig", cfg, err)
		}
	}
}

// TestToleratedFaultsDocker runs tolerated faults on the docker backend:
// those whose Docker operations differ from the process backend's (latency
// is the same proxy on both, and each run costs seconds of container
// start-up). Without a Docker engine it is skipped, saying so; with CI=true
// and a working `docker info` it always runs.
func TestToleratedFaultsDocker(t *testing.T) {
	testenv.RequireDocker(t)
	for _, f := range []fault.Kind{fault.Kill, fault.Restart, fault.Pause, fault.Partition} {
		t.Run(string(f), func(t *testing.T) {
			res := shortOn(t, "docker", f)
			if res.Verdict != history.VerdictOK {
				t.Fatalf("verdict %s: %s; violations %+v", res.Verdict, res.Reason, res.Violations)
			}
			if n := res.Found.Total(); n != 0 {
				t.Fatalf("%d violations under %s, a fault the lock tolerates: %+v", n, f, res.Violations)
			}
			if len(res.Faults) == 0 {
				t.Fatalf("no %s fault was injected", f)
			}
			// Run closed the backend: nothing of this process may be left.
			left, err := backend.SweepDocker(context.Background(), backend.SweepOwn())
			if err != nil || left > 0 {
				t.Fatalf("the run left %d containers, volumes or networks behind (%v)", left, err)
			}
		})
	}
}

// TestFailedInjectionFailsTheRun makes every clock-skew injection fail (the
// process backend is pointed at a libfaketime that does not exist): the run
// must say so in its error and in every report, and must not pass.
func TestFailedInjectionFailsTheRun(t *testing.T) {
	t.Setenv(chaos.FaketimeEnv, filepath.Join(t.TempDir(), "libfaketime.so.1"))
	run, err := chaos.Run(t.Context(), chaos.Config{
		Nodes: 3, Clients: 3, Duration: 2 * time.Second, Faults: []fault.Kind{fault.ClockSkew}, Seed: 7,
		TTL: 300 * time.Millisecond, NodeTimeout: 50 * time.Millisecond,
	})
	t.Logf("err: %v; verdict %s (%s)", err, run.Result.Verdict, run.Result.Reason)
	if !errors.Is(err, chaos.ErrInjection) || !errors.Is(err, backend.ErrNoFaketime) {
		t.Errorf("Run error %v, want ErrInjection wrapping backend.ErrNoFaketime", err)
	}
	if run.Result.Verdict == history.VerdictOK {
		t.Errorf("verdict ok, although no clock-skew fault could be injected")
	}
	rep := report.New(run)
	if n := rep.Faults[fault.ClockSkew]; n != 0 {
		t.Errorf("%d clock-skew faults counted as injected", n)
	}
	if len(rep.FailedFaults) == 0 || rep.FailedFaults[0].Kind != fault.ClockSkew ||
		!strings.Contains(rep.FailedFaults[0].Error, "libfaketime") {
		t.Fatalf("the report lists failed faults %+v", rep.FailedFaults)
	}
	var text strings.Builder
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "FAILED clock-skew") {
		t.Errorf("the text report does not list the failure:\n%s", text.String())
	}
}
