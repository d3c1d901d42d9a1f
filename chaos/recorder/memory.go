package recorder

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/history"
)

// Memory is a Sink that keeps the history in memory, to be read at any time
// while the recording goes on (History, Stats) and followed op by op
// (Watch). Its methods are safe for concurrent use. Make one with NewMemory.
type Memory struct {
	mu    sync.Mutex // protects the fields below
	run   run
	h     history.History
	stats Stats
	watch func(history.Op)
}

var _ Sink = (*Memory)(nil)

// NewMemory returns an empty Memory sink.
func NewMemory() *Memory { return &Memory{} }

// Stats are running counts, cheap to read while the recording goes on.
type Stats struct {
	Elapsed         time.Duration // time since the Recorder was made
	Acquisitions    int           // successful acquires
	AcquireFailures int           // failed acquires
	Faults          int           // faults started
	Writes          int           // writes accepted
	StaleRejected   int           // writes rejected as stale
}

func (m *Memory) open(r run) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.run, m.h.Nodes = r, r.nodes
}

func (m *Memory) client(name string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.h.Clients = append(m.h.Clients, name)
}

// record keeps op, a new one or the completion of one kept (ops are kept
// at their ID, which the Recorder gives in order), and counts it.
func (m *Memory) record(op history.Op) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if op.ID > len(m.h.Ops) {
		m.h.Ops = append(m.h.Ops, op)
		if op.Kind == history.KindFault {
			m.stats.Faults++
		}
	} else {
		m.h.Ops[op.ID-1] = op
	}
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		m.stats.Acquisitions++
	case op.Kind == history.KindAcquire && op.Outcome == history.Failed:
		m.stats.AcquireFailures++
	case op.Kind == history.KindWrite && op.Outcome == history.OK:
		m.stats.Writes++
	case op.Kind == history.KindWrite && op.Outcome == history.Rejected:
		m.stats.StaleRejected++
	}
	if m.watch != nil {
		m.watch(op)
	}
}

func (m *Memory) store(resource string, entries []string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.h.Final == nil {
		m.h.Final = map[string][]string{}
	}
	m.h.Final[resource] = slices.Clone(entries)
}

func (m *Memory) close() error { return nil }

// History returns a copy of what was recorded so far, ending now. Its ops
// are in the order they were invoked, but for faults recorded when they
// ended (Recorder.NodeFaultAt, Client.FaultAt); an op still in flight is
// pending (Outcome history.Pending).
func (m *Memory) History() history.History {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.h
	h.Ops, h.Clients = slices.Clone(h.Ops), slices.Clone(h.Clients)
	if h.Final != nil {
		h.Final = make(map[string][]string, len(m.h.Final))
		for res, entries := range maps.All(m.h.Final) {
			h.Final[res] = slices.Clone(entries)
		}
	}
	if m.run.now != nil {
		h.End = m.run.now()
	}
	return h
}

// Stats returns the running counts.
func (m *Memory) Stats() Stats {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.stats
	if m.run.now != nil {
		s.Elapsed = m.run.now()
	}
	return s
}

// Watch makes m call f with every op as it is recorded: once when it is
// invoked (Outcome history.Pending) and once more when it completes (a fault
// recorded when it ended: once, complete). f is called in the order of the
// stamps, so it sees an op's invocation before its completion; it must not
// call the Recorder or m. A nil f stops the calls.
func (m *Memory) Watch(f func(history.Op)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.watch = f
}
