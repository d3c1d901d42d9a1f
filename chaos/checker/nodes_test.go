package checker_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
)

// simAllowance is the release allowance of the node scenarios.
const simAllowance = 10 * time.Millisecond

// probeRound probes every node for h: node i found value[i] ("" for no
// key) with a time to live of pttl[i].
func (s *sim) probeRound(h simHold, value []string, pttl []time.Duration) {
	calls := make([]*recorder.ProbeCall, len(value))
	for i := range value {
		calls[i] = h.Probe(i)
	}
	s.step(200 * time.Microsecond)
	for i, c := range calls {
		if value[i] == "" {
			c.NoKey()
		} else {
			c.Found(value[i], pttl[i], false)
		}
	}
	s.step(200 * time.Microsecond)
}

// held is a probe round's values: h's value on the first n of 5 nodes.
func held(h simHold, n int) []string {
	v := make([]string, 5)
	for i := range n {
		v[i] = h.Value()
	}
	return v
}

// ttls is a probe round's times to live: long on every node but the first
// short ones, which have short.
func ttls(short int, shortTTL time.Duration) []time.Duration {
	t := make([]time.Duration, 5)
	for i := range t {
		t[i] = 2 * simValidity
		if i < short {
			t[i] = shortTTL
		}
	}
	return t
}

// acquireProbed is a turn of client 0 whose acquire is probed on every
// node: h's value on all, short of the validity on the first short ones.
func (s *sim) acquireProbed(short int) simHold {
	h := s.acquire(0, -1)
	s.probeRound(h, held(h, 5), ttls(short, simValidity/3))
	s.write(h, false, false)
	return h
}

var nodeScenarios = []struct {
	name          string
	run           func(s *sim)
	verdict       checker.Verdict
	found, expect checker.Counts
}{
	{
		name: "nodes-kept",
		run: func(s *sim) {
			s.rounds(2)
			h := s.acquireProbed(2) // two nodes short of Until: a quorum still holds it
			s.release(h.Hold, false)
			s.probeRound(h, held(h, 2), ttls(5, simValidity)) // two did not answer the release yet
			s.step(simAllowance)
			s.probeRound(h, held(h, 0), nil)
			s.rounds(1)
		},
		verdict: checker.VerdictOK,
	},
	{
		name: "until-beyond-quorum",
		run: func(s *sim) {
			s.rounds(2)
			h := s.acquireProbed(3)
			s.release(h.Hold, false)
			s.rounds(1)
		},
		verdict: checker.VerdictViolated,
		found:   checker.Counts{UntilBeyondQuorum: 1},
	},
	{
		// The same, with the clock of a node that fell short jumping.
		name: "until-beyond-quorum-under-clock-skew",
		run: func(s *sim) {
			s.rounds(2)
			s.fault("skew", fault.ClockSkew, 1)
			h := s.acquireProbed(3)
			s.heal("skew")
			s.release(h.Hold, false)
			s.rounds(1)
		},
		verdict: checker.VerdictOK,
		found:   checker.Counts{UntilBeyondQuorum: 1},
		expect:  checker.Counts{UntilBeyondQuorum: 1},
	},
	{
		name: "unlock-released-on-too-few",
		run: func(s *sim) {
			s.rounds(2)
			h := s.acquireProbed(0)
			s.release(h.Hold, false)
			s.probeRound(h, held(h, 3), ttls(5, simValidity))
			s.rounds(1)
		},
		verdict: checker.VerdictViolated,
		found:   checker.Counts{UnlockResult: 1},
	},
	{
		name: "unlock-lost-while-held",
		run: func(s *sim) {
			s.rounds(2)
			h := s.acquireProbed(0)
			s.release(h.Hold, true)
			s.rounds(1)
		},
		verdict: checker.VerdictViolated,
		found:   checker.Counts{UnlockResult: 1},
	},
	{
		// Lost, and rightly: the Unlock came after the keys the probes saw
		// had expired.
		name: "unlock-lost-when-gone",
		run: func(s *sim) {
			s.rounds(2)
			h := s.acquireProbed(0)
			s.step(3 * simValidity)
			s.release(h.Hold, true)
			s.rounds(1)
		},
		verdict: checker.VerdictOK,
	},
	{
		name: "leftover-after-release",
		run: func(s *sim) {
			s.rounds(2)
			h := s.acquireProbed(0)
			s.release(h.Hold, false)
			s.step(simAllowance)
			s.probeRound(h, []string{"", h.Value(), "", "", ""}, ttls(5, simValidity))
			s.rounds(1)
		},
		verdict: checker.VerdictViolated,
		found:   checker.Counts{LeftoverGrant: 1},
	},
	{
		// The same leftover, on a node cut off meanwhile: the release is
		// owed until it answers.
		name: "leftover-under-partition",
		run: func(s *sim) {
			s.rounds(2)
			h := s.acquireProbed(0)
			s.fault("partition", fault.Partition, 1)
			s.release(h.Hold, false)
			s.step(simAllowance)
			s.heal("partition")
			s.probeRound(h, []string{"", h.Value(), "", "", ""}, ttls(5, simValidity))
			s.rounds(1)
		},
		verdict: checker.VerdictOK,
		found:   checker.Counts{LeftoverGrant: 1},
		expect:  checker.Counts{LeftoverGrant: 1},
	},
	{
		// A failed acquire's own grant, found on a node after the
		// allowance; the same found before it is not judged.
		name: "leftover-after-failure",
		run: func(s *sim) {
			s.rounds(2)
			s.clients[1].Acquire("k").Fail(errors.New("not acquired"))
			s.clients[1].Probe("k", 2).Found("mine", simValidity, true)
			// Past the allowance and the run's p99 release latency,
			// which stretches it.
			s.step(2 * simAllowance)
			s.clients[1].Probe("k", 2).Found("mine", simValidity, true)
			s.clients[1].Probe("k", 3).Found("theirs", simValidity, false)
			s.clients[1].Probe("k", 4).Fail(errors.New("timeout"))
			s.rounds(1)
		},
		verdict: checker.VerdictViolated,
		found:   checker.Counts{LeftoverGrant: 1},
	},
	{
		// A machine so loaded that releases take three allowances: a
		// grant a failed acquire left is still there one and a half
		// allowances on, within the allowance stretched by the run's p99
		// release latency — the release is as late as the run's were.
		name: "leftover-within-slow-releases",
		run: func(s *sim) {
			for i := range 3 {
				h := s.acquire(i%len(s.clients), -1)
				r := h.Release()
				s.step(3 * simAllowance)
				r.OK()
			}
			s.clients[1].Acquire("k").Fail(errors.New("not acquired"))
			s.step(3 * simAllowance / 2)
			s.clients[1].Probe("k", 2).Found("mine", simValidity, true)
			s.rounds(1)
		},
		verdict: checker.VerdictOK,
	},
	{
		// A machine that was not loaded: twenty clean turns, their
		// releases half a millisecond each, and one release that took
		// fifty allowances (its client paused in the middle of it). A
		// grant a failed acquire left is still there five allowances on:
		// a leftover. One slow release in a short run is not the
		// machine's load, yet it is the run's p99 (with fewer than a
		// hundred releases, the slowest), and the stretch it gives hides
		// the leftover.
		name: "leftover-past-one-slow-release",
		run: func(s *sim) {
			s.rounds(20)
			h := s.acquire(0, -1)
			r := h.Release()
			s.step(50 * simAllowance)
			r.OK()
			s.clients[1].Acquire("k").Fail(errors.New("not acquired"))
			s.step(5 * simAllowance)
			s.clients[1].Probe("k", 2).Found("mine", simValidity, true)
			s.rounds(1)
		},
		verdict: checker.VerdictViolated,
		found:   checker.Counts{LeftoverGrant: 1},
	},
	{
		// No release in the run (every hold ran out): the stretch, which
		// docs/history-format.md says is the p99 latency of the history's
		// releases, falls back to the acquires', waits behind holders
		// included. One Lock that waited fifty allowances for a hold to
		// run out then hides a grant a failed acquire left five
		// allowances before the probe.
		name: "leftover-past-a-long-wait-no-releases",
		run: func(s *sim) {
			s.acquire(0, -1)
			wait := s.clients[2].Acquire("k")
			s.step(50 * simAllowance)
			s.token++
			s.ok(wait)
			s.step(2 * simValidity) // its hold runs out too
			s.clients[1].Acquire("k").Fail(errors.New("not acquired"))
			s.step(5 * simAllowance)
			s.clients[1].Probe("k", 2).Found("mine", simValidity, true)
		},
		verdict: checker.VerdictViolated,
		found:   checker.Counts{LeftoverGrant: 1},
	},
}

// TestNodeGuarantees checks the node scenarios' golden histories
// (go test -run NodeGuarantees -update rewrites them).
func TestNodeGuarantees(t *testing.T) {
	for _, sc := range nodeScenarios {
		t.Run(sc.name, func(t *testing.T) {
			s := newSim(5, 4)
			sc.run(s)
			s.rec.Store("r", s.log)
			h := s.mem.History()
			h.Clients = nil // the files number their clients, as a chaos run's did
			var gen bytes.Buffer
			if err := history.WriteJSONL(&gen, h); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", sc.name+".jsonl")
			if *checker.UpdateGoldens {
				if err := os.WriteFile(path, gen.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(data, gen.Bytes()) {
				t.Errorf("%s differs from what the generator writes (run with -update)", path)
			}
			back, err := history.ReadJSONL(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			var again bytes.Buffer
			if err := history.WriteJSONL(&again, back); err != nil || !bytes.Equal(again.Bytes(), data) {
				t.Errorf("read and written again, %s differs (%v)", path, err)
			}
			res := checker.Check(back, checker.CheckOptions{ReleaseAllowance: simAllowance})
			if res.Verdict != sc.verdict || res.Found != sc.found || res.Expected != sc.expect {
				t.Fatalf("verdict %s (%s), found %+v, expected %+v; want %s, %+v, %+v\n%v",
					res.Verdict, res.Reason, res.Found, res.Expected, sc.verdict, sc.found, sc.expect, res.Violations)
			}
			// Without an allowance, leftovers are not judged.
			if n := checker.Check(back, checker.CheckOptions{}).Found.LeftoverGrant; n != 0 {
				t.Errorf("%d leftover grants judged with no allowance", n)
			}
		})
	}
}

// TestProbeLineErrors checks that a probe line that breaks the format is
// refused, naming the field.
func TestProbeLineErrors(t *testing.T) {
	const acq = `{"kind":"acquire","client":0,"key":"k","invoke_ns":0,"complete_ns":5,"outcome":"ok","token":1,"value":"v"}` + "\n"
	for _, tc := range []struct{ line, field string }{
		{`{"kind":"probe","client":0,"key":"k","invoke_ns":6,"complete_ns":7,"outcome":"ok"}`, "node"},
		{`{"kind":"probe","client":0,"key":"k","node":-1,"invoke_ns":6,"complete_ns":7,"outcome":"ok"}`, "node"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","pttl_ns":5}`, "pttl_ns"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","value":"v","pttl_ns":0}`, "pttl_ns"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"failed","value":"v"}`, "value"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","value":""}`, "value"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","own":true}`, "own"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","value":"v","own":1}`, "own"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"lost"}`, "outcome"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","token":2}`, "token"},
		{`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","entry":"e"}`, "entry"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := history.ReadJSONL(strings.NewReader(acq + tc.line + "\n"))
			var le *history.LineError
			if !errors.As(err, &le) || le.Line != 2 || le.Field != tc.field {
				t.Fatalf("error %v; want line 2, field %q", err, tc.field)
			}
		})
	}
	// A good one names its hold, and keeps the value it found.
	h, err := history.ReadJSONL(strings.NewReader(acq +
		`{"kind":"probe","client":0,"key":"k","node":1,"invoke_ns":6,"complete_ns":7,"outcome":"ok","token":1,"value":"w","pttl_ns":9}` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if p := h.Ops[1]; p.Hold != 1 || p.Value != "w" || p.PTTL != 9 || p.Node != 1 {
		t.Fatalf("probe read as %+v", p)
	}
}

// TestNodeGuaranteesHandWritten checks hand-written histories that a
// correct lock can record.
func TestNodeGuaranteesHandWritten(t *testing.T) {
	for _, tc := range []struct {
		file  string
		found checker.Counts
	}{
		// An Unlock said lost; the probes before it saw the value on a
		// quorum with a PTTL reaching 0.5 ms past its return: PTTL is
		// rounded down, so the keys may have expired up to 1 ms sooner.
		{file: "unlock-lost-within-pttl-rounding"},
		// Holds recorded without their values: probes that find no key
		// after a release, or a value, cannot be matched to them.
		{file: "unlock-released-no-value"},
		{file: "until-no-value"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file+".jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			h, err := history.ReadJSONL(bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			res := checker.Check(h, checker.CheckOptions{})
			if res.Verdict != checker.VerdictOK || res.Found != tc.found {
				t.Fatalf("verdict %s (%s), found %+v; want ok, %+v", res.Verdict, res.Reason, res.Found, tc.found)
			}
		})
	}
}
