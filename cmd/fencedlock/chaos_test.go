package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

func TestChaosCommand(t *testing.T) {
	dir := t.TempDir()
	jsonPath, htmlPath, histPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "r.html"), filepath.Join(dir, "h.jsonl")
	r := call(t.Context(), append([]string{"chaos", "--nodes", "3", "--clients", "3", "--faults", "kill,pause", "--seed", "3",
		"--quiet", "--json", jsonPath, "--html", htmlPath, "--history", histPath}, chaosFlags(t)...)...)
	if r.code != 0 {
		logHistory(t, histPath)
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stdout, "verdict: OK") {
		t.Fatalf("no verdict in the summary:\n%s", r.stdout)
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"nodes", "clients", "duration_s", "acquisitions", "acquire_failures", "faults",
		"violations", "stale_writes_rejected", "verdict"} {
		if _, ok := rep[k]; !ok {
			t.Errorf("JSON report lacks %q", k)
		}
	}
	if rep["nodes"] != 3.0 || rep["verdict"] != "ok" || rep["acquisitions"].(float64) < 10 {
		t.Errorf("report %v", rep)
	}
	h, err := os.ReadFile(htmlPath)
	if err != nil || !strings.Contains(string(h), "<svg") {
		t.Fatalf("HTML report: %v (%d bytes)", err, len(h))
	}
}

func TestChaosBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--faults", "kill,meteor"},
		{"--nodes", "0"},
		{"--backend", "vm"},
		{"--duration", "soon"},
		{"--seed", "0"},
		{"--node-timeout", "0s"},
		{"extra"},
		{"--lock", "zookeeper"},
		{"--lock", "sentinel"},        // needs --replicas
		{"--lock", "fencedlock-acks"}, // so does this
		{"--lock", "redsync", "--client-procs"},
		{"--lock", "redislock", "--lanes", "2"},
		{"--lock", "redsync", "--faults", "client-clock-skew"},
		{"--lock", "all", "--history", "h.jsonl"},
		{"--lock", "redsync", "--history", "h.jsonl"},
		{"--faults", "rolling,kill"},                 // the rolling restarts take no other kinds
		{"--faults", "rolling", "--nodes", "2"},      // need 3 nodes
		{"--faults", "rolling", "--lock", "redsync"}, // drive a fencedlock variant
		{"--faults", "rolling", "--lanes", "2"},
	} {
		r := call(t.Context(), append([]string{"chaos"}, args...)...)
		// A bad --backend is found once the run begins, after its first line.
		lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
		if r.code != exitUsage || len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-2], "fencedlock chaos: ") ||
			lines[len(lines)-1] != "Try 'fencedlock chaos --help'." || strings.Contains(r.stderr, "Usage:") {
			t.Errorf("chaos %q: exit %d, stderr %q; want 2, one line and the hint", args, r.code, r.stderr)
		}
	}
}

// The exit statuses that --help promises beyond 0 and 2: 1 for a violation
// the faults do not explain (with --strict, none does), 3 when faults could
// not be injected (libfaketime pointed at nothing).
func TestChaosExitStatuses(t *testing.T) {
	common := append([]string{"chaos", "--nodes", "3", "--clients", "3", "--seed", "3", "--quiet"}, chaosFlags(t)...)
	t.Run("1 violated", func(t *testing.T) {
		r := call(t.Context(), append(slices.Clone(common), "--faults", "client-pause", "--strict")...)
		if r.code != 1 || !strings.Contains(r.stdout, "verdict: VIOLATED") || !strings.Contains(r.stdout, "UNEXPECTED mutual_exclusion") {
			t.Fatalf("exit %d, want 1\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
	t.Run("3 faults failed", func(t *testing.T) {
		t.Setenv("FENCEDLOCK_LIBFAKETIME", filepath.Join(t.TempDir(), "libfaketime.so.1"))
		r := call(t.Context(), append(slices.Clone(common), "--faults", "clock-skew")...)
		if r.code != 3 || !strings.Contains(r.stdout, "verdict: UNKNOWN") || !strings.Contains(r.stdout, "FAILED clock-skew") ||
			!strings.Contains(r.stderr, "libfaketime not found") {
			t.Fatalf("exit %d, want 3\n%s%s", r.code, r.stdout, r.stderr)
		}
	})
}

// --client-procs runs the clients as processes of this binary: the summary
// and the JSON report list them, and each client-pause as a SIGSTOP.
func TestChaosClientProcs(t *testing.T) {
	dir := t.TempDir()
	jsonPath, histPath := filepath.Join(dir, "r.json"), filepath.Join(dir, "h.jsonl")
	r := call(t.Context(), append([]string{"chaos", "--client-procs", "--nodes", "3", "--clients", "2",
		"--faults", "client-pause", "--seed", "3", "--quiet", "--json", jsonPath, "--history", histPath}, chaosFlags(t)...)...)
	if r.code != 0 {
		logHistory(t, histPath)
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"2 client processes", "client processes: pids ", "ended: 2 exit status 0", "SIGSTOP client "} {
		if !strings.Contains(r.stdout+r.stderr, want) {
			t.Errorf("no %q in the output:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		ClientProcs []struct {
			PID   int              `json:"pid"`
			Stops []map[string]any `json:"stops"`
		} `json:"client_procs"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	stops := 0
	for _, p := range rep.ClientProcs {
		if p.PID <= 0 || p.PID == os.Getpid() {
			t.Errorf("client process pid %d", p.PID)
		}
		stops += len(p.Stops)
	}
	if len(rep.ClientProcs) != 2 || stops == 0 {
		t.Errorf("JSON report: %d client processes, %d stops; want 2, and stops", len(rep.ClientProcs), stops)
	}
}

// An interrupted run reports what ran, says so, and exits 130.
func TestChaosInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	args := append([]string{"chaos", "--nodes", "3", "--clients", "2", "--faults", "kill", "--json", jsonPath},
		chaosFlags(t)...)
	args = append(args, "--duration", "10m") // ended by the interrupt, long before
	var stdout bytes.Buffer
	// The first progress line (after a second of workload) is the interrupt.
	stderr := &cancelOn{marker: "acq=", cancel: cancel}
	code := realMain(ctx, args, &stdout, stderr)
	if code != exitInterrupted {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, exitInterrupted, stdout.String(), stderr.String())
	}
	if !strings.HasPrefix(stdout.String(), "INTERRUPTED after ") {
		t.Errorf("summary does not open with the interruption:\n%s", stdout.String())
	}
	b, err := os.ReadFile(jsonPath)
	if err != nil {
		t.Fatal(err)
	}
	var rep map[string]any
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep["interrupted"] != true || !slices.Contains([]any{"ok", "violated", "unknown"}, rep["verdict"]) {
		t.Errorf("JSON interrupted %v, verdict %v", rep["interrupted"], rep["verdict"])
	}
}

// cancelOn collects what is written and calls cancel once marker shows.
type cancelOn struct {
	marker string
	cancel context.CancelFunc
	mu     sync.Mutex // protects b
	b      bytes.Buffer
}

func (w *cancelOn) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.marker) {
		w.cancel()
	}
	return len(p), nil
}

func (w *cancelOn) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
