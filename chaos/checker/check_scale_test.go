package checker

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// TestCheckShapes checks the shapes of BenchmarkCheck (which measures how
// reading and checking grow with them): a short history of each, kept in
// testdata with its verdict (go test -run Shapes -update rewrites them).
func TestCheckShapes(t *testing.T) {
	const goldenLines = 200
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

		})
	}
}

func checkJSONL(t *testing.T, data []byte) Result {
	t.Helper()
	h, err := history.ReadJSONL(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return Check(h, CheckOptions{})
}
