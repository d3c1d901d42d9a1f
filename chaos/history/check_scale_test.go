package history

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestCheckScales checks the shapes of BenchmarkCheck: a short history of
// each, kept in testdata with its verdict (go test -run Scales -update
// rewrites them), and that reading and checking one scaleFactor times as
// long takes less than scaleFactor^1.5 times as long. That bound is halfway,
// on a log scale, between linear growth (scaleFactor times) and quadratic
// growth (scaleFactor² times): O(n log n) passes stay well under it, a pass
// that is quadratic in the keys, the holds of a token or the ops of a key
// goes well over it.
func TestCheckScales(t *testing.T) {
	const goldenLines, lines, scaleFactor = 200, 4_000, 8
	for _, tc := range []struct {
		shape   string
		verdict Verdict
		found   Counts
	}{
		{shape: "many-keys", verdict: VerdictOK},
		// Every hold has token 1: each after the first is a duplicate, and
		// out of order after the one before it.
		{shape: "repeated-token", verdict: VerdictViolated,
			found: Counts{FencingOrder: goldenLines/2 - 1, DuplicateTokens: goldenLines/2 - 1}},
		{shape: "contended", verdict: VerdictOK},
	} {
		t.Run(tc.shape, func(t *testing.T) {
			var gen func(int) []byte
			for _, sh := range benchShapes {
				if sh.name == tc.shape {
					gen = sh.gen
				}
			}
			data := gen(goldenLines)
			path := filepath.Join("testdata", "scale-"+tc.shape+".jsonl")
			if *update {
				if err := os.WriteFile(path, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			kept, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(kept, data) {
				t.Errorf("%s differs from what the generator writes (run with -update)", path)
			}
			res := checkJSONL(t, kept)
			if res.Verdict != tc.verdict || res.Found != tc.found {
				t.Fatalf("verdict %s (%s), found %+v; want %s, %+v", res.Verdict, res.Reason, res.Found, tc.verdict, tc.found)
			}

			short, long := gen(lines), gen(scaleFactor*lines)
			ratio := float64(timeCheck(t, long)) / float64(timeCheck(t, short))
			if bound := math.Pow(scaleFactor, 1.5); ratio > bound {
				t.Errorf("%d times the lines took %.1f times the CPU time to read and check; want under %.1f", scaleFactor, ratio, bound)
			}
		})
	}
}

func checkJSONL(t *testing.T, data []byte) Result {
	t.Helper()
	h, err := ReadJSONL(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return Check(h, CheckOptions{})
}

// timeCheck returns the least of three CPU times to read and check data:
// CPU time, and the least, so that other work on the machine does not count.
func timeCheck(t *testing.T, data []byte) time.Duration {
	best := time.Duration(math.MaxInt64)
	for range 3 {
		start := cpuTime()
		checkJSONL(t, data)
		best = min(best, cpuTime()-start)
	}
	return best
}
