package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A short manyholds run, two counts: the rows are in the JSON and the
// table, every hold was taken, and none was lost in a hold shorter than
// the first extension (so a loss here is the harness's, not the watchdog's).
func TestManyHoldsRun(t *testing.T) {
	jsonPath := filepath.Join(t.TempDir(), "r.json")
	var stdout, stderr bytes.Buffer
	code := run(t.Context(), []string{
		"--scenarios", scManyHolds, "--holds", "50,100", "--holds-ttl", "3s", "--holds-for", "200ms",
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
	if len(rep.ManyHolds) != 2 || len(rep.Results) != 0 {
		t.Fatalf("%d manyholds rows and %d others, want 2 and 0", len(rep.ManyHolds), len(rep.Results))
	}
	for i, want := range []int{50, 100} {
		r := rep.ManyHolds[i]
		if r.Holds != want || r.Acquired != want || r.Lost != 0 {
			t.Errorf("row %d: %+v, want %d holds, all taken, none lost", i, r, want)
		}
	}
	if !strings.Contains(stdout.String(), "manyholds") {
		t.Errorf("no manyholds table in the output:\n%s", stdout.String())
	}
}

func TestManyHoldsBadUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--holds", "0"}, {"--holds", "ten"}, {"--holds-ttl", "0s"}, {"--holds-for", "-1s"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := run(t.Context(), append([]string{"--scenarios", scManyHolds}, args...), &stdout, &stderr); code != 2 {
				t.Fatalf("exit %d, want 2 (bad usage); stderr: %s", code, stderr.String())
			}
		})
	}
}
