package fencing

import (
	"context"
	"slices"
	"sync"
)

// Memory is a Guard and Appender that keeps high-water marks and logs in the
// memory of one process: for tests, simulations, and state that lives in one
// process anyway. It is safe for concurrent use, and a zero Memory is ready to
// use. Nothing is ever evicted: each resource keeps its high-water mark and its
// whole log until the Memory is dropped.
type Memory struct {
	obs       GuardObserver // set by NewMemoryWith; nil: none
	mu        sync.Mutex    // protects resources
	resources map[string]*memResource
}

type memResource struct {
	highest uint64
	log     []Entry
}

var _ Appender = (*Memory)(nil)

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{} }

// MemoryOption configures NewMemoryWith; every [Option] is one.
type MemoryOption interface{ applyMemory(*Memory) }

// NewMemoryWith returns an empty Memory configured by opts (e.g.
// [WithObserver]).
func NewMemoryWith(opts ...MemoryOption) *Memory {
	m := &Memory{}
	for _, o := range opts {
		if o != nil {
			o.applyMemory(m)
		}
	}
	return m
}

// Admit records token for resource if it is not stale. It returns ctx.Err()
// without admitting anything if ctx is already done.
func (m *Memory) Admit(ctx context.Context, resource string, token uint64) error {
	return m.admit(ctx, resource, token, nil)
}

// Append admits token and appends entry to the resource's log, or returns the
// error and appends nothing.
func (m *Memory) Append(ctx context.Context, resource string, token uint64, entry string) error {
	return m.admit(ctx, resource, token, func(r *memResource) {
		r.log = append(r.log, Entry{Token: token, Data: entry})
	})
}

// admit checks and records token and, if it was admitted, runs write in the
// same critical section.
func (m *Memory) admit(ctx context.Context, resource string, token uint64, write func(*memResource)) error {
	if err := validate(resource, token); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return observe(m.obs, resource, token, m.admitLocked(resource, token, write))
}

// admitLocked is admit's decision, under m.mu.
func (m *Memory) admitLocked(resource string, token uint64, write func(*memResource)) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	r := m.resources[resource]
	if r == nil {
		if m.resources == nil {
			m.resources = make(map[string]*memResource)
		}
		r = &memResource{}
		m.resources[resource] = r
	}
	if token < r.highest {
		return &StaleTokenError{Resource: resource, Token: token, Highest: r.highest}
	}
	r.highest = token
	if write != nil {
		write(r)
	}
	return nil
}

// Highest returns the highest token admitted for resource, or 0.
func (m *Memory) Highest(resource string) uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.resources[resource]; r != nil {
		return r.highest
	}
	return 0
}

// Log returns a copy of the resource's log, oldest entry first.
func (m *Memory) Log(resource string) []Entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r := m.resources[resource]; r != nil {
		return slices.Clone(r.log)
	}
	return nil
}
