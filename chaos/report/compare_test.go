package report_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/report"
)

func lockRun(lock string, v checker.Verdict, token bool, found checker.Counts) report.Run {
	res := checker.Result{Verdict: v, Reason: "r", Found: found, Expected: checker.Counts{MutualExclusion: found.MutualExclusion / 2}, Acquisitions: 10}
	if !token {
		res.NotApplicable = checker.TokenProperties()
	}
	return report.Run{Lock: lock, Seed: 3, Nodes: 5, Result: res}
}

func isFencedlock(l string) bool { return strings.HasPrefix(l, "fencedlock") }

// The comparison's verdict is fencedlock's (either variant); the other
// locks' counts are shown, and a token property is n/a (null) without a
// token, never 0.
func TestCompare(t *testing.T) {
	bad := checker.Counts{MutualExclusion: 4, StaleWritesAccepted: 2}
	for _, tc := range []struct {
		name string
		runs []report.Run
		want checker.Verdict
	}{
		{"fencedlock ok, redsync violated", []report.Run{
			lockRun("fencedlock", checker.VerdictOK, true, checker.Counts{}),
			lockRun("redsync", checker.VerdictViolated, false, bad)}, checker.VerdictOK},
		{"fencedlock-acks violated", []report.Run{
			lockRun("fencedlock", checker.VerdictOK, true, checker.Counts{}),
			lockRun("fencedlock-acks", checker.VerdictViolated, true, bad)}, checker.VerdictViolated},
		{"fencedlock unknown", []report.Run{
			lockRun("fencedlock", checker.VerdictUnknown, true, checker.Counts{}),
			lockRun("redislock", checker.VerdictOK, false, checker.Counts{})}, checker.VerdictUnknown},
		{"no fencedlock", []report.Run{
			lockRun("redsync", checker.VerdictOK, false, checker.Counts{})}, checker.VerdictUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := report.Compare(tc.runs, isFencedlock)
			if c.Verdict != tc.want {
				t.Errorf("verdict %s (%s), want %s", c.Verdict, c.Reason, tc.want)
			}
			if len(c.Rows) != len(tc.runs) {
				t.Fatalf("%d rows, want %d", len(c.Rows), len(tc.runs))
			}
		})
	}

	runs := []report.Run{
		lockRun("fencedlock", checker.VerdictOK, true, checker.Counts{}),
		lockRun("redsync", checker.VerdictViolated, false, bad),
	}
	c := report.Compare(runs, isFencedlock)
	c.Rows[0].HTML = "report-fencedlock.html"

	var text bytes.Buffer
	if err := c.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(text.String(), "\n")
	if len(lines) < 4 || !strings.Contains(lines[3], "| redsync ") || !strings.Contains(lines[3], " n/a ") ||
		!strings.Contains(lines[3], " 4 (2 unexp.) ") ||
		!strings.Contains(lines[2], " 0 ") || strings.Contains(lines[2], "n/a") {
		t.Errorf("table: want redsync's token columns n/a and fencedlock's 0:\n%s", text.String())
	}

	var js bytes.Buffer
	if err := report.NewCompareReport(runs, c).WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Nodes      int    `json:"nodes"`
		Verdict    string `json:"verdict"`
		Violations struct {
			FencingOrder *int `json:"fencing_order"`
		} `json:"violations"`
		Comparison struct {
			Locks []struct {
				Lock                string `json:"lock"`
				FencingOrder        *int   `json:"fencing_order"`
				StaleWritesAccepted int    `json:"stale_writes_accepted"`
			} `json:"locks"`
		} `json:"comparison"`
		Runs map[string]json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got.Nodes != 5 || got.Verdict != "ok" || got.Violations.FencingOrder == nil || len(got.Runs) != 2 {
		t.Errorf("the single-run fields are not fencedlock's with the comparison's verdict:\n%s", js.String())
	}
	if l := got.Comparison.Locks; len(l) != 2 || l[0].FencingOrder == nil || l[1].FencingOrder != nil || l[1].StaleWritesAccepted != 2 {
		t.Errorf("comparison rows: want fencedlock's fencing order 0, redsync's null and 2 stale writes:\n%s", js.String())
	}

	var page bytes.Buffer
	if err := c.WriteIndexHTML(&page); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if !strings.Contains(html, `<a href="report-fencedlock.html">fencedlock</a>`) || !strings.Contains(html, "<td>redsync</td>") {
		t.Errorf("index: want fencedlock linked to its timeline, redsync (no timeline) plain:\n%s", html)
	}
	for _, ext := range []string{"http://", "https://", "<script", "<link"} {
		if strings.Contains(html, ext) {
			t.Errorf("index not self-contained: has %q", ext)
		}
	}
}
