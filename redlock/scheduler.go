package redlock

import (
	"container/heap"
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/clock"
)

// scheduler runs funcs at given times on the Client's clock, all from one
// goroutine, which runs while there is work and exits when there is none:
// the waits that many holds or releases owe cost no goroutine each. Its
// funcs must not block (they queue node calls). Once the Client closes it
// drops what is still due; the funcs' owners say what that means.
type scheduler struct {
	c *Client

	mu      sync.Mutex // protects due, running, closed
	due     dueHeap
	running bool // the goroutine is running (or about to)
	closed  bool
	wake    chan struct{} // a new earliest entry; buffered 1
}

func newScheduler(c *Client) *scheduler {
	return &scheduler{c: c, wake: make(chan struct{}, 1)}
}

type dueEntry struct {
	at time.Time
	f  func()
}

// dueHeap is a min-heap of entries by time.
type dueHeap []dueEntry

func (h dueHeap) Len() int           { return len(h) }
func (h dueHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h dueHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *dueHeap) Push(x any)        { *h = append(*h, x.(dueEntry)) }
func (h *dueHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = dueEntry{}
	*h = old[:len(old)-1]
	return e
}

// at schedules f at t; it reports false, and drops f, once the Client is
// closing.
func (s *scheduler) at(t time.Time, f func()) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	heap.Push(&s.due, dueEntry{at: t, f: f})
	first := s.due[0].at.Equal(t)
	start := !s.running
	s.running = true
	s.mu.Unlock()
	if start {
		s.c.goBackground(s.run)
	} else if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
	return true
}

// run runs the entries as they fall due, until none is left or the Client
// closes.
func (s *scheduler) run() {
	clk := s.c.cfg.clock
	var t clock.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		s.mu.Lock()
		if s.closed || len(s.due) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		now := clk.Now()
		var ready []func()
		for len(s.due) > 0 && !s.due[0].at.After(now) {
			ready = append(ready, heap.Pop(&s.due).(dueEntry).f)
		}
		var wait time.Duration
		if len(s.due) > 0 {
			wait = s.due[0].at.Sub(now)
		}
		s.mu.Unlock()
		for _, f := range ready {
			f()
		}
		if len(ready) > 0 {
			continue // the funcs may have scheduled more
		}
		if t == nil {
			t = clk.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-t.C():
		case <-s.wake: // Reset above discards a value that fired meanwhile
		case <-s.c.closing:
			if n := s.close(); n > 0 {
				s.c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "redlock: Close dropped scheduled work",
					slog.Int("entries", n))
			}
			return
		}
	}
}

// close drops what is still due and refuses new entries; it returns how
// many it dropped.
func (s *scheduler) close() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	s.running = false
	n := len(s.due)
	s.due = nil
	return n
}
