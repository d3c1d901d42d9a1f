package mutants

import (
	"testing"
	"time"
)

// TestSmokeQuorumOffByOne builds the CLI with the quorum off by one and
// checks that a short chaos run kills it (the campaign itself, `make
// mutants`, is too slow for the tests).
func TestSmokeQuorumOffByOne(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the CLI and runs real Redis nodes")
	}
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	m, ok := Find("quorum-off-by-one")
	if !ok {
		t.Fatal("no mutant quorum-off-by-one")
	}
	res, err := Run(t.Context(), root, t.TempDir(), m, Chaos{Faults: "hunt", Duration: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if res.Outcome != Killed {
		t.Fatalf("outcome %s (%s), want killed", res.Outcome, res.Evidence)
	}
	if res.Evidence == "" || res.Report.Violations.Total() == 0 {
		t.Errorf("killed without evidence: %+v", res.Report)
	}
	t.Logf("killed after %v of the run (%v wall): %s", res.KilledAt, res.Elapsed.Round(time.Millisecond), res.Evidence)
}
