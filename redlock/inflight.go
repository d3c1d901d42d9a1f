package redlock

import "sync"

// inflightCalls counts the node calls queued or on the wire, and the
// attempts still deciding; wait returns once none is. Close uses it to let
// attempts settle and releases and heals finish.
type inflightCalls struct {
	mu   sync.Mutex // protects n, zero
	n    int
	zero chan struct{} // closed when n drops to 0; nil when nobody waits
}

func (t *inflightCalls) add(n int) {
	t.mu.Lock()
	t.n += n
	t.mu.Unlock()
}

func (t *inflightCalls) done() {
	t.mu.Lock()
	t.n--
	if t.n < 0 {
		panic("redlock: inflight below zero")
	}
	if t.n == 0 && t.zero != nil {
		close(t.zero)
		t.zero = nil
	}
	t.mu.Unlock()
}

// wait returns once no call is in flight, or when deadline is closed.
func (t *inflightCalls) wait(deadline <-chan struct{}) {
	t.mu.Lock()
	if t.n == 0 {
		t.mu.Unlock()
		return
	}
	if t.zero == nil {
		t.zero = make(chan struct{})
	}
	z := t.zero
	t.mu.Unlock()
	select {
	case <-z:
	case <-deadline:
	}
}
