package redlock

import (
	"container/heap"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

// The scheduler is a Client's one watchdog: it ends holds whose validity ran
// out (for Done) and extends auto-extended ones, for every hold of the
// Client, with one goroutine and a min-heap of due times on the injected
// clock — a hold costs an entry, not a goroutine and a timer. It also runs
// the retries of owed releases (owe.go) when they fall due (at). The goroutine
// runs only while some hold is scheduled. Extensions are I/O: they run on at
// most maxExtensions goroutines at once, the earliest due first, so that a
// slow round of them delays the next ones instead of piling onto the nodes.
//
// Lock order: a Lock's mu before the scheduler's. The scheduler never takes
// a Lock's mu while it holds its own: it reads only the due times that the
// holds gave it, and asks each due hold what is due (Lock.due) after
// letting go.

// maxExtensions bounds the extensions in flight at once: as many as one
// round of a node's pipelines carries (workersPerNode batches of maxBatch
// calls), so that the nodes are kept busy. More would only wait in the
// nodes' queues, where their node timeout runs as well. Measured with the
// bench's manyholds scenario (50,000 holds, TTL 5s): 16 or 64 lost 13-23%
// of the holds, the nodes underused; this many lost none; 1024 lost none,
// but its calls timed out in the queues (460 node errors a second).
const maxExtensions = workersPerNode * maxBatch

// A scheduler is made by New; a zero one (a Client built by hand, in
// tests) can only be closed.
type scheduler struct {
	c    *Client
	kick chan struct{} // cap 1: the head of holds moved earlier

	mu      sync.Mutex // protects the fields below and every Lock's sched
	holds   holdHeap   // by due time, earliest first: holds, and funcs (at)
	running bool       // the goroutine runs (see run)
	closed  bool       // Close ended every scheduled hold: none is scheduled again
	ready   []*Lock    // extensions due, waiting for a free slot (earliest first)
	workers int        // extensions in flight, ≤ maxExtensions
}

// schedEntry is a hold's place in the scheduler (guarded by scheduler.mu).
type schedEntry struct {
	pos int // index in the heap + 1; 0: not in it
}

// set schedules l at due, or moves it there. It reports false when the
// Client is closed: nothing is scheduled any more, and the caller ends l.
// The caller holds l.mu.
func (s *scheduler) set(l *Lock, due time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	e := &l.sched
	if e.pos == 0 {
		heap.Push(&s.holds, dueHold{due: due, l: l})
	} else {
		s.holds[e.pos-1].due = due
		heap.Fix(&s.holds, e.pos-1)
	}
	if !s.running {
		s.running = true
		s.c.goBackground(s.run)
	}
	if e.pos == 1 { // the new head: the goroutine's timer may be set later
		s.wake()
	}
	return true
}

// at runs f on the scheduler's goroutine at t (it must not block). It
// reports false, and drops f, once the Client is closed: Close gives up
// what is still to run.
func (s *scheduler) at(t time.Time, f func()) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	heap.Push(&s.holds, dueHold{due: t, f: f})
	if !s.running {
		s.running = true
		s.c.goBackground(s.run)
	}
	if s.holds[0].due.Equal(t) { // the new head: the goroutine's timer may be set later
		s.wake()
	}
	return true
}

// remove unschedules l; the caller holds l.mu.
func (s *scheduler) remove(l *Lock) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l.sched.pos == 0 {
		return
	}
	heap.Remove(&s.holds, l.sched.pos-1)
	if len(s.holds) == 0 && s.running { // let the goroutine exit now
		s.wake()
	}
}

// wake has the goroutine look at the heap again; s.mu is held.
func (s *scheduler) wake() {
	select {
	case s.kick <- struct{}{}:
	default: // a kick is pending already
	}
}

// run is the scheduler's goroutine: it hands each hold that is due to
// Lock.due, and sleeps on the clock until the next one is. It exits when
// no hold is scheduled (set starts it again) or the Client closes.
func (s *scheduler) run() {
	clk := s.c.cfg.clock
	var timer clock.Timer
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
	}
	defer func() { stop() }()
	for {
		now := clk.Now()
		due, next, idle := s.popDue(now)
		if idle {
			return
		}
		for _, d := range due {
			if d.l != nil {
				s.c.safely(func() { d.l.due(now) })
			} else {
				s.c.safely(d.f)
			}
		}
		if len(due) > 0 {
			continue // what they scheduled may be due already
		}
		// On a Fake, armed for the instant, not for next−now: the clock
		// may have moved since now was read (a test's Advance in between
		// would otherwise put the timer that far past the hold's due time).
		stop()
		timer = clock.NewTimerAt(clk, next)
		select {
		case <-timer.C():
		case <-s.kick:
		case <-s.c.life.Done():
			return
		}
	}
}

// popDue takes the holds due at now out of the heap; next is when the next
// one is due. idle says that none is scheduled: the goroutine exits.
func (s *scheduler) popDue(now time.Time) (due []dueHold, next time.Time, idle bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for len(s.holds) > 0 && !s.holds[0].due.After(now) {
		due = append(due, heap.Pop(&s.holds).(dueHold))
	}
	if len(due) == 0 && len(s.holds) == 0 {
		s.running = false
		return nil, time.Time{}, true
	}
	if len(s.holds) > 0 {
		next = s.holds[0].due
	}
	return due, next, false
}

// extend runs l's extension on a free slot, or queues it for the next one.
func (s *scheduler) extend(l *Lock) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.workers == maxExtensions {
		s.ready = append(s.ready, l)
		s.mu.Unlock()
		return
	}
	s.workers++
	s.mu.Unlock()
	s.c.goBackground(func() {
		for l != nil {
			s.c.safely(l.watchdogExtend)
			l = s.next()
		}
	})
}

// next is the queued extension a worker runs after its own, if any; nil
// lets the worker exit.
func (s *scheduler) next() *Lock {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.ready) == 0 || s.closed {
		s.workers--
		return nil
	}
	l := s.ready[0]
	s.ready[0] = nil
	s.ready = s.ready[1:]
	if len(s.ready) == 0 {
		s.ready = nil // let the backing array go
	}
	return l
}

// close unschedules every hold and returns them, for Close to end; nothing
// is scheduled after it.
func (s *scheduler) close() []*Lock {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	held := make([]*Lock, 0, len(s.holds))
	for _, h := range s.holds {
		if h.l != nil { // a func (at) is dropped
			held = append(held, h.l)
			h.l.sched.pos = 0
		}
	}
	s.holds, s.ready = nil, nil
	return held
}

// dueHold is a hold in the heap with its due time, kept beside it so that
// ordering the heap reads no Lock; or, with l nil, a func to run then.
type dueHold struct {
	due time.Time
	l   *Lock
	f   func()
}

// place records where d is in the heap (i+1; 0: not in it), for a hold.
func (d dueHold) place(pos int) {
	if d.l != nil {
		d.l.sched.pos = pos
	}
}

// holdHeap orders holds by due time (container/heap).
type holdHeap []dueHold

func (h holdHeap) Len() int           { return len(h) }
func (h holdHeap) Less(i, j int) bool { return h[i].due.Before(h[j].due) }
func (h holdHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].place(i + 1)
	h[j].place(j + 1)
}
func (h *holdHeap) Push(x any) {
	d := x.(dueHold)
	d.place(len(*h) + 1)
	*h = append(*h, d)
}
func (h *holdHeap) Pop() any {
	old := *h
	d := old[len(old)-1]
	old[len(old)-1] = dueHold{}
	d.place(0)
	*h = old[:len(old)-1]
	return d
}
