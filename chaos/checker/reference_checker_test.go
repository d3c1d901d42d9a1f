package checker

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// refVerdicts is what the reference checker decides, per property: violated
// or not.
type refVerdicts map[Property]bool

// refCheck is a deliberately simple checker of four safety properties,
// written from docs/history-format.md alone (no code of the checker's):
// quadratic, for small histories.
func refCheck(h history.History) refVerdicts {
	eps := h.ClockError
	type hold struct {
		op         history.Op
		start, end time.Duration
	}
	var holds []hold
	for _, a := range h.Ops {
		if a.Kind != history.KindAcquire || a.Outcome != history.OK {
			continue
		}
		// A hold lasts from the acquire's return to the earliest of its
		// release's invocation, its lost signal, its validity end (raised by
		// successful extends) and the end a lost extend sets (the validity
		// end as it stood at its invocation, or its return with none; none
		// when a successful extend returned after it);
		// longer if the holder writes after that.
		// A lost extend counts only when no successful extend returned
		// after it or with it.
		renewedAfter := func(lost history.Op) bool {
			for _, op := range h.Ops {
				if op.Hold == a.ID && op.Kind == history.KindExtend && op.Outcome == history.OK && op.Complete >= lost.Complete {
					return true
				}
			}
			return false
		}
		end := h.End
		valid := a.ValidUntil
		var lastWrite time.Duration
		for _, op := range h.Ops { // in invocation order
			if op.Hold != a.ID {
				continue
			}
			switch {
			case op.Kind == history.KindRelease || op.Kind == history.KindLost:
				end = min(end, op.Invoke)
			case op.Kind == history.KindExtend && op.Outcome == history.OK && valid != 0:
				valid = max(valid, op.ValidUntil)
			case op.Kind == history.KindExtend && op.Outcome == history.LockLost && !renewedAfter(op):
				if valid != 0 {
					end = min(end, valid)
				} else {
					end = min(end, op.Complete)
				}
			case op.Kind == history.KindWrite:
				lastWrite = max(lastWrite, op.Invoke)
			}
		}
		if valid != 0 {
			end = min(end, valid)
		}
		end = max(end, lastWrite)
		holds = append(holds, hold{a, a.Complete, end})
	}
	v := refVerdicts{}
	for i, a := range holds {
		for j, b := range holds {
			if i == j || a.op.Key != b.op.Key {
				continue
			}
			// Mutual exclusion: two holds overlap by more than the clock error.
			if a.start <= b.start && min(a.end, b.end)-b.start > eps && (a.start < b.start || i < j) {
				v[MutualExclusion] = true
			}
			// Fencing order: A returned before B began (by more than the
			// clock error), yet B's token is no greater.
			if a.op.Complete+eps < b.op.Invoke && a.op.Token >= b.op.Token {
				v[FencingOrder] = true
			}
			// Duplicate tokens: two acquires of a key got one token.
			if i < j && a.op.Token == b.op.Token {
				v[DuplicateTokens] = true
			}
		}
	}
	// Stale writes accepted: a write the store took although it had taken
	// one with a greater token to the same resource before (by its
	// sequence numbers, or acknowledged before this one was invoked).
	for _, w := range h.Ops {
		for _, x := range h.Ops {
			if w.Kind != history.KindWrite || x.Kind != history.KindWrite || w.Outcome != history.OK || x.Outcome != history.OK ||
				w.Resource != x.Resource || x.Token <= w.Token {
				continue
			}
			if (w.Seq != 0 && x.Seq != 0 && x.Seq < w.Seq) || x.Complete < w.Invoke {
				v[StaleWritesAccepted] = true
			}
		}
	}
	return v
}

// randomHistory writes a small random valid history in the format: clients
// each take holds of one of two keys in turn, extend, write, release or
// lose them, on timelines that interleave at random.
func randomHistory(rng *rand.Rand) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"kind":"run","version":2,"nodes":3,"clock_error_ns":%d}`+"\n", rng.IntN(3)*rng.IntN(3))
	entries := 0
	// The store numbers its writes once each, in an order of its own: the
	// sequence numbers drawn are distinct, in any order.
	seqs := rng.Perm(64)
	for c := range 1 + rng.IntN(3) {
		t := rng.Int64N(10)
		for range 1 + rng.IntN(3) {
			key := []string{"k", "j"}[rng.IntN(2)]
			inv, comp := t, t+1+rng.Int64N(3)
			t = comp
			tok := 1 + rng.IntN(4)
			if rng.IntN(5) == 0 {
				fmt.Fprintf(&b, `{"kind":"acquire","client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":"failed"}`+"\n", c, key, inv, comp)
				continue
			}
			valid := ""
			hasValid := rng.IntN(3) > 0
			if hasValid {
				valid = fmt.Sprintf(`,"valid_until_ns":%d`, comp+1+rng.Int64N(10))
			}
			fmt.Fprintf(&b, `{"kind":"acquire","client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":"ok","token":%d%s}`+"\n",
				c, key, inv, comp, tok, valid)
			for range rng.IntN(4) {
				inv := t + rng.Int64N(3)
				comp := inv + rng.Int64N(3)
				t = comp
				switch rng.IntN(3) {
				case 0:
					out, v := "ok", ""
					if rng.IntN(2) == 0 {
						out = "lost"
					} else if hasValid {
						v = fmt.Sprintf(`,"valid_until_ns":%d`, inv+1+rng.Int64N(10))
					}
					fmt.Fprintf(&b, `{"kind":"extend","client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":%q,"token":%d%s}`+"\n",
						c, key, inv, comp, out, tok, v)
				default:
					entries++
					out, seq := []string{"ok", "ok", "rejected", "failed"}[rng.IntN(4)], ""
					if out == "ok" && rng.IntN(2) == 0 && len(seqs) > 0 {
						seq = fmt.Sprintf(`,"seq":%d`, 1+seqs[0])
						seqs = seqs[1:]
					}
					fmt.Fprintf(&b, `{"kind":"write","client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":%q,"token":%d,"resource":"db","entry":"e%d"%s}`+"\n",
						c, key, inv, comp, out, tok, entries, seq)
				}
			}
			inv = t + rng.Int64N(3)
			switch rng.IntN(3) {
			case 0:
				fmt.Fprintf(&b, `{"kind":"release","client":%d,"key":%q,"invoke_ns":%d,"complete_ns":%d,"outcome":%q,"token":%d}`+"\n",
					c, key, inv, inv+rng.Int64N(3), []string{"ok", "lost", "failed"}[rng.IntN(3)], tok)
			case 1:
				fmt.Fprintf(&b, `{"kind":"lost","client":%d,"key":%q,"invoke_ns":%d,"token":%d}`+"\n", c, key, inv, tok)
			}
			t = inv + 1
		}
	}
	return b.String()
}

// FuzzCheckerAgreesWithReference: on small random valid histories, the
// checker finds a violation of mutual exclusion, fencing order, duplicate
// tokens and stale writes accepted exactly when the reference checker does.
func FuzzCheckerAgreesWithReference(f *testing.F) {
	for seed := range uint64(200) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, seed uint64) {
		text := randomHistory(rand.New(rand.NewPCG(seed, 7)))
		h, err := history.ReadJSONL(strings.NewReader(text))
		if err != nil {
			t.Fatalf("the generator wrote an unreadable history: %v\n%s", err, text)
		}
		ref := refCheck(h)
		res := Check(h, CheckOptions{})
		for _, p := range []Property{MutualExclusion, FencingOrder, DuplicateTokens, StaleWritesAccepted} {
			if got := res.Found.Get(p) > 0; got != ref[p] {
				var vs bytes.Buffer
				for _, v := range res.Violations {
					fmt.Fprintf(&vs, "  %s: %s\n", v.Property, v.Detail)
				}
				t.Fatalf("%s: checker says violated=%v, reference %v\n%s\nchecker found:\n%s", p, got, ref[p], text, vs.String())
			}
		}
	})
}
