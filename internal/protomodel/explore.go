package protomodel

import (
	"fmt"
	"math/bits"
	"time"
)

// Result is what a search found.
type Result struct {
	Config      Config
	States      int           // distinct states (up to node symmetry)
	Transitions int           // steps taken, including those into known states
	Depth       int           // longest shortest path from the start, in steps
	Holds       int           // most Locks returned within one run
	Elapsed     time.Duration // wall time of the search
	Truncated   bool          // MaxStates stopped it
	Violation   *Violation    // the first property broken, on a shortest path
}

// Violation is a property broken, and a shortest run that breaks it.
type Violation struct {
	Property Property
	Trace    []Event
}

// Event is one step of a trace: what happened, and the state after it.
type Event struct {
	What  string
	State string
}

//go:norace
func (r *Result) String() string {
	s := fmt.Sprintf("%v: %d states, %d transitions, depth %d, up to %d locks in a run, %v",
		r.Config, r.States, r.Transitions, r.Depth, r.Holds, r.Elapsed.Round(time.Millisecond))
	if r.Truncated {
		s += " (stopped at MaxStates)"
	}
	if r.Violation != nil {
		s += fmt.Sprintf("\nviolation of %s after %d steps:\n%s", r.Violation.Property,
			len(r.Violation.Trace)-1, r.Violation.Format())
	}
	return s
}

// Format prints the trace, one numbered step a line, each followed by the
// state it leads to.
//
//go:norace
func (v *Violation) Format() string {
	var s string
	for i, e := range v.Trace {
		if i == 0 {
			s += fmt.Sprintf("   0 %-46s %s\n", "start", e.State)
			continue
		}
		s += fmt.Sprintf("%4d %-46s %s\n", i, e.What, e.State)
	}
	return s
}

// Explore visits, breadth first, every state reachable within the bound,
// once each up to renaming nodes and clients, and checks every property
// after every step. Breadth first makes the first violation found one with
// a shortest trace.
//
//go:norace
func (m *Model) Explore() *Result {
	begin := time.Now()
	x := &search{m: m, r: &Result{Config: m.cfg}, seen: newSeen()}
	init := m.initial()
	enc := init.encode(&m.cfg, &x.buf)
	x.seen.add(fingerprint(enc), 0)
	x.width = len(enc)
	frontier := queue{width: x.width}
	frontier.push(enc)
	for depth := 0; !frontier.empty() && x.found == 0 && !x.r.Truncated; depth++ {
		x.r.Depth = depth
		x.next = queue{width: x.width}
		for !frontier.empty() && x.found == 0 {
			e := frontier.pop()
			var s State
			s.decode(&m.cfg, e)
			x.here = fingerprint(e)
			x.r.Holds = max(x.r.Holds, bits.OnesCount64(s.returned))
			m.successors(&s, x.visit)
			if m.cfg.MaxStates > 0 && x.seen.n >= m.cfg.MaxStates {
				x.r.Truncated = true
				break
			}
		}
		frontier = x.next
	}
	r := x.r
	r.States = x.seen.n
	if x.found != 0 {
		r.Violation = &Violation{Property: x.broken, Trace: m.replay(x.seen, x.found, init)}
		r.Depth = len(r.Violation.Trace) - 1
	}
	r.Elapsed = time.Since(begin)
	return r
}

// search is one breadth-first search in progress.
type search struct {
	m      *Model
	r      *Result
	seen   *seen
	here   uint64 // the state being expanded
	next   queue  // the next level
	width  int
	buf    [maxEnc]byte
	found  uint64 // the first state that broke a property
	broken Property
}

// visit handles one successor t of the state being expanded.
//
//go:norace
func (x *search) visit(_ step, t *State) {
	x.r.Transitions++
	if x.found != 0 {
		return
	}
	e := t.encode(&x.m.cfg, &x.buf)
	fp := fingerprint(e)
	if !x.seen.add(fp, x.here) {
		return
	}
	if p := x.m.check(t); p != "" {
		x.found, x.broken = fp, p
		return
	}
	x.next.push(e)
}

// queue holds encoded states of one width, in chunks (a level of a
// million states is never copied to grow).
type queue struct {
	width  int
	chunks [][]byte
	head   int // read offset in chunks[0]
}

const chunkStates = 4096

//go:norace
func (q *queue) push(e []byte) {
	n := len(q.chunks)
	if n == 0 || len(q.chunks[n-1])+q.width > cap(q.chunks[n-1]) {
		q.chunks = append(q.chunks, make([]byte, 0, chunkStates*q.width))
		n++
	}
	q.chunks[n-1] = append(q.chunks[n-1], e...)
}

//go:norace
func (q *queue) pop() []byte {
	e := q.chunks[0][q.head : q.head+q.width]
	q.head += q.width
	if q.head == len(q.chunks[0]) {
		q.chunks[0] = nil
		q.chunks, q.head = q.chunks[1:], 0
	}
	return e
}

//go:norace
func (q *queue) empty() bool { return len(q.chunks) == 0 }

// replay turns the chain of fingerprints that ends at last into a run of
// concrete states: from the start, take at each step a successor whose
// canonical form is the next link.
//
//go:norace
func (m *Model) replay(visited *seen, last uint64, init State) []Event {
	var chain []uint64
	for fp := last; fp != 0; fp = visited.parent(fp) {
		chain = append(chain, fp)
	}
	var buf [maxEnc]byte
	cur := init
	trace := []Event{{State: m.render(&cur)}}
	for k := len(chain) - 2; k >= 0; k-- {
		want := chain[k]
		var got State
		var how step
		ok := false
		m.successors(&cur, func(st step, t *State) {
			if !ok && fingerprint(t.encode(&m.cfg, &buf)) == want {
				got, how, ok = *t, st, true
			}
		})
		if !ok {
			panic("protomodel: trace does not replay")
		}
		trace = append(trace, Event{What: m.describe(&cur, how, &got), State: m.render(&got)})
		cur = got
	}
	return trace
}
