package backendtest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

// Recording is a Backend that records the calls made to it, for tests of
// what drives a Backend (faults, schedules). N is its node count; a call whose
// op name is in Fail fails with that error.
type Recording struct {
	N    int
	Fail map[string]error // by op name

	mu    sync.Mutex // protects calls
	calls []string
}

var _ backend.Backend = (*Recording)(nil)

type recordingNode int

func (n recordingNode) Index() int   { return int(n) }
func (n recordingNode) Addr() string { return fmt.Sprintf("node%d:6379", int(n)) }

func (b *Recording) Nodes() []backend.Node {
	var nodes []backend.Node
	for i := range b.N {
		nodes = append(nodes, recordingNode(i))
	}
	return nodes
}

func (b *Recording) do(op string, i int, arg ...any) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := fmt.Sprintf("%s %d", op, i)
	for _, a := range arg {
		c += fmt.Sprintf(" %v", a)
	}
	b.calls = append(b.calls, c)
	return b.Fail[op]
}

// Took returns the calls made so far, e.g. "kill 1", "latency 2 5ms".
func (b *Recording) Took() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.calls)
}

func (b *Recording) Kill(_ context.Context, i int) error  { return b.do("kill", i) }
func (b *Recording) Start(_ context.Context, i int) error { return b.do("start", i) }
func (b *Recording) Restart(_ context.Context, i int, withData bool) error {
	return b.do("restart", i, withData)
}
func (b *Recording) Pause(_ context.Context, i int) error     { return b.do("pause", i) }
func (b *Recording) Resume(_ context.Context, i int) error    { return b.do("resume", i) }
func (b *Recording) Partition(_ context.Context, i int) error { return b.do("partition", i) }
func (b *Recording) Heal(_ context.Context, i int) error      { return b.do("heal", i) }
func (b *Recording) SetLatency(_ context.Context, i int, d time.Duration) error {
	return b.do("latency", i, d)
}
func (b *Recording) SetClockSkew(_ context.Context, i int, spec string) error {
	return b.do("skew", i, fmt.Sprintf("%q", spec))
}
func (b *Recording) Close() error { return nil }
