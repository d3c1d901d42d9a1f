package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlock/fencedlock/bench/contender"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// A short replicas run: both phases have a row for each library asked for
// (and fencedlock-acks, which comes with fencedlock), the two ratios are
// measured, and fencedlock-acks did wait for the replicas. The latencies
// are not compared: one short run on a shared machine is noise.
//
// That the acks were waited for is read from what the replies said, not
// from the option: in the serial phase every TryLock that succeeded
// counted only on a quorum of nodes whose WAIT reported the node's one
// replica, so the replicas that WAIT replies reported are at least the
// quorum per operation — zero if the option were off, or the replicas
// absent (then no TryLock succeeds either). fencedlock without the option
// sends no WAIT at all.
func TestReplicasRun(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{
		"--scenarios", scReplicas, "--libs", "fencedlock,redsync,raw",
		"--duration", "400ms", "--rounds", "1", "--warmup", "0s", "--goroutines", "8",
		"--json", jsonPath, "-q",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]*Result{}
	for _, r := range rep.Results {
		got[r.Scenario+"/"+r.Library] = r
	}
	libs := []string{contender.Fencedlock, contender.FencedlockAcks, contender.Redsync, contender.Raw}
	if len(rep.Results) != 2*len(libs) {
		t.Errorf("%d rows, want %d", len(rep.Results), 2*len(libs))
	}
	const quorum = ownNodes/2 + 1
	for _, sc := range []string{scReplicas, scReplicasParallel} {
		for _, lib := range libs {
			r := got[sc+"/"+lib]
			if r == nil {
				t.Errorf("%s/%s: missing from the JSON", sc, lib)
				continue
			}
			if r.Ops <= 0 || r.OpsPerSec <= 0 || r.P50Ms <= 0 {
				t.Errorf("%s/%s: ops %d, ops/s %g, p50 %g", sc, lib, r.Ops, r.OpsPerSec, r.P50Ms)
			}
			waits := r.Commands["wait"]
			switch {
			case lib != contender.FencedlockAcks && (waits != 0 || r.ReplicaAcksPerOp != 0):
				t.Errorf("%s/%s: %g WAITs and %g replica acks per op, want none", sc, lib, waits, r.ReplicaAcksPerOp)
			case lib == contender.FencedlockAcks && (waits <= 0 || r.ReplicaAcksPerOp <= 0):
				t.Errorf("%s/%s: %g WAITs and %g replica acks per op, want some", sc, lib, waits, r.ReplicaAcksPerOp)
			case lib == contender.FencedlockAcks && sc == scReplicas && r.ReplicaAcksPerOp < quorum:
				t.Errorf("%s/%s: %g replica acks per op, want at least the quorum, %d", sc, lib, r.ReplicaAcksPerOp, quorum)
			}
		}
	}
	for _, name := range []string{"replicas p50: fencedlock-acks / fencedlock", "replicas parallel ops/s: fencedlock-acks / fencedlock"} {
		var found bool
		for _, r := range rep.Ratios {
			if r.Name != name {
				continue
			}
			found = true
			if r.Value == nil || *r.Value <= 0 || r.Status != "measured" || r.Target != "" {
				t.Errorf("ratio %q: value %v, status %q, target %q", name, r.Value, r.Status, r.Target)
			}
		}
		if !found {
			t.Errorf("no ratio %q in the JSON", name)
		}
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("no ratio %q in the table:\n%s", name, stdout.String())
		}
	}
	for _, s := range []string{"replicas-parallel", "fencedlock-acks", "replica acknowledgements"} {
		if !strings.Contains(stdout.String(), s) {
			t.Errorf("table has no %q:\n%s", s, stdout.String())
		}
	}
}

// With nodes it did not start, lockbench cannot attach replicas: the
// scenario is skipped, said so, and the run still succeeds.
func TestReplicasSkippedOnForeignNodes(t *testing.T) {
	var addrs []string
	for _, p := range redistest.StartN(t, ownNodes) {
		addrs = append(addrs, p.Addr())
	}
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{
		"--nodes", strings.Join(addrs, ","), "--scenarios", scReplicas, "--duration", "100ms", "--rounds", "1",
	}, &stdout, &stderr)
	if code != 0 {
		t.Fatalf("exit %d\nstderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "skipping "+scReplicas) {
		t.Errorf("no skip notice on stderr:\n%s", stderr.String())
	}
}
