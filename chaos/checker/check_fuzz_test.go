package checker_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// FuzzCheck: whatever history ReadJSONL returns, Check judges it without
// panicking, and judges it the same when it is written and read back. The
// seed corpus (run by every go test) is the golden histories in testdata,
// the format's edge cases, and the histories recorded on real nodes.
func FuzzCheck(f *testing.F) {
	goldens, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	rules, _ := filepath.Glob(filepath.Join("testdata", "format", "*.jsonl"))
	recorded, _ := filepath.Glob(filepath.Join("..", "history", "testdata", "recorded", "*.jsonl"))
	for _, p := range slices.Concat(goldens, rules, recorded) {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := history.ReadJSONL(bytes.NewReader(data))
		if err != nil {
			return
		}
		res := checker.Check(h, checker.CheckOptions{})
		var buf bytes.Buffer
		if err := history.WriteJSONL(&buf, h); err != nil {
			t.Fatal(err)
		}
		back, err := history.ReadJSONL(&buf)
		if err != nil {
			t.Fatalf("re-reading what WriteJSONL wrote: %v", err)
		}
		if again := checker.Check(back, checker.CheckOptions{}); again.Verdict != res.Verdict || again.Found != res.Found {
			t.Fatalf("read back, the verdict changed: %s %+v, then %s %+v", res.Verdict, res.Found, again.Verdict, again.Found)
		}
	})
}
