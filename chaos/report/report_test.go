package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

var update = flag.Bool("update", false, "rewrite the golden reports in testdata")

func TestReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		broken  bool
		verdict checker.Verdict
		found   checker.Counts
	}{
		{"ok", false, checker.VerdictOK, checker.Counts{MutualExclusion: 1}},
		{"violated", true, checker.VerdictViolated, checker.Counts{MutualExclusion: 2, StaleWritesAccepted: 1, LostWrites: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep := New(sampleRun(tc.broken))
			if rep.Verdict != tc.verdict || rep.Violations != tc.found {
				t.Fatalf("verdict %s (%s), violations %+v; want %s, %+v", rep.Verdict, rep.Reason, rep.Violations, tc.verdict, tc.found)
			}
			var js, text bytes.Buffer
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			golden(t, tc.name+".json", js.Bytes())
			golden(t, tc.name+".txt", text.Bytes())

			var m map[string]any
			if err := json.Unmarshal(js.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			for _, k := range []string{"nodes", "clients", "duration_s", "acquisitions", "acquire_failures",
				"faults", "violations", "stale_writes_rejected", "verdict"} {
				if _, ok := m[k]; !ok {
					t.Errorf("JSON report has no %q", k)
				}
			}
			vs, _ := m["violations"].(map[string]any)
			for _, k := range []string{"mutual_exclusion", "fencing_order", "duplicate_tokens", "stale_writes_accepted", "lost_writes"} {
				if _, ok := vs[k].(float64); !ok {
					t.Errorf("JSON violations has no number %q: %v", k, vs)
				}
			}
			if m["verdict"] != string(tc.verdict) || m["nodes"] != 5.0 || m["stale_writes_rejected"] != 1.0 {
				t.Errorf("JSON verdict %v, nodes %v, stale_writes_rejected %v", m["verdict"], m["nodes"], m["stale_writes_rejected"])
			}
			faults, _ := m["faults"].(map[string]any)
			if faults["kill"] != 1.0 || faults["client-pause"] != 1.0 || len(faults) != 4 {
				t.Errorf("JSON faults %v", faults)
			}
		})
	}
}

// golden compares got with testdata/name (go test -update rewrites it).
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test -update to accept):\n%s", path, got)
	}
}

func TestLatency(t *testing.T) {
	for _, tc := range []struct {
		name string
		ms   []int
		want Latency
	}{
		{"none", nil, Latency{}},
		{"one", []int{3}, Latency{3, 3, 3}},
		{"hundred", seq(100), Latency{50, 99, 100}},
		{"unsorted", []int{9, 1, 5}, Latency{5, 9, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h history.History
			for i, d := range tc.ms {
				h.Ops = append(h.Ops, history.Op{ID: i + 1, Kind: history.KindAcquire, Outcome: history.OK,
					Invoke: time.Second, Complete: time.Second + time.Duration(d)*time.Millisecond})
			}
			if got := latency(h); got != tc.want {
				t.Errorf("latency %+v, want %+v", got, tc.want)
			}
		})
	}
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i + 1
	}
	slices.Reverse(s)
	return s
}

func TestProgress(t *testing.T) {
	for _, tc := range []struct {
		stats      recorder.Stats
		violations int
		want       string
	}{
		{recorder.Stats{}, 0, "t=0.0s acq=0 fail=0 faults=0 violations=0"},
		{recorder.Stats{Elapsed: 7240 * time.Millisecond, Acquisitions: 1234, AcquireFailures: 3, Faults: 5}, 2,
			"t=7.2s acq=1234 fail=3 faults=5 violations=2"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := Progress(tc.stats, tc.violations); got != tc.want {
				t.Errorf("got %q", got)
			}
		})
	}
}

// A fault that could not be injected is listed in every form of the report,
// is not counted as injected, and leaves the verdict unknown.
func TestReportFailedFault(t *testing.T) {
	run := sampleRun(false)
	h := run.History
	h.Ops = append(slices.Clone(h.Ops), history.Op{ID: len(h.Ops) + 1, Kind: history.KindFault, Fault: fault.ClockSkew,
		Node: 2, Invoke: 5 * time.Millisecond, Complete: 6 * time.Millisecond, Outcome: history.Failed,
		Err: "backend: libfaketime not found"})
	run.History, run.Result = h, checker.Check(h, checker.CheckOptions{})
	rep := New(run)
	if rep.Verdict != checker.VerdictUnknown {
		t.Errorf("verdict %s (%s), want unknown", rep.Verdict, rep.Reason)
	}
	if n := rep.Faults[fault.ClockSkew]; n != 0 {
		t.Errorf("the failed clock skew counted as injected (%d)", n)
	}
	want := FailedFault{Kind: fault.ClockSkew, Target: "node 2", StartMs: 5, EndMs: 6, Error: "backend: libfaketime not found"}
	if len(rep.FailedFaults) != 1 || rep.FailedFaults[0] != want {
		t.Errorf("FailedFaults = %+v, want [%+v]", rep.FailedFaults, want)
	}
	var text, js, page bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	if err := WriteHTML(&page, run); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"text": text.String(), "json": js.String(), "html": page.String()} {
		if !bytes.Contains([]byte(out), []byte("libfaketime not found")) {
			t.Errorf("the %s report does not list the failed fault:\n%s", name, out)
		}
	}
	if !bytes.Contains(text.Bytes(), []byte("FAILED clock-skew on node 2")) {
		t.Errorf("text report:\n%s", text.String())
	}
}

// An interrupted run says so in every form of the report, first thing in
// the text, and keeps its verdict.
func TestReportInterrupted(t *testing.T) {
	for _, interrupted := range []bool{false, true} {
		t.Run(fmt.Sprint("interrupted=", interrupted), func(t *testing.T) {
			run := sampleRun(false)
			run.Interrupted = interrupted
			rep := New(run)
			var text, js, page bytes.Buffer
			if err := rep.WriteText(&text); err != nil {
				t.Fatal(err)
			}
			if err := rep.WriteJSON(&js); err != nil {
				t.Fatal(err)
			}
			if err := WriteHTML(&page, run); err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(js.Bytes(), &m); err != nil {
				t.Fatal(err)
			}
			if m["interrupted"] != interrupted || m["verdict"] != "ok" {
				t.Errorf("JSON interrupted %v, verdict %v", m["interrupted"], m["verdict"])
			}
			if got := strings.HasPrefix(text.String(), "INTERRUPTED after "); got != interrupted {
				t.Errorf("text opens with the interruption: %v, want %v\n%s", got, interrupted, text.String())
			}
			if got := strings.Contains(page.String(), `<span class="interrupted">`); got != interrupted {
				t.Errorf("page marked interrupted: %v, want %v", got, interrupted)
			}
		})
	}
}
