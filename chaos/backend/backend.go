package backend

import (
	"context"
	"errors"
	"time"
)

// Node is one Redis node as clients see it.
type Node interface {
	// Index is the node's position in Backend.Nodes, from 0.
	Index() int
	// Addr is the host:port clients use. It stays the same for the life of
	// the Backend, whatever is done to the node behind it.
	Addr() string
}

// Backend owns N Redis nodes and injects faults into them. Node indexes run
// from 0 to N-1; a bad index is an error wrapping ErrNoNode. Every method is
// safe for concurrent use; operations on the same node are serialised.
type Backend interface {
	// Nodes returns the nodes, in index order.
	Nodes() []Node

	// Kill stops node i at once (SIGKILL, or the equivalent). Killing a
	// stopped node does nothing.
	Kill(ctx context.Context, i int) error
	// Start starts a killed node again with its data and waits until it
	// answers. Starting a running node does nothing.
	Start(ctx context.Context, i int) error
	// Restart kills node i and starts it again, with its data or empty (as
	// after a disk loss), and waits until it answers.
	Restart(ctx context.Context, i int, withData bool) error

	// Pause freezes node i (SIGSTOP, docker pause): its connections stay
	// open and nothing is answered. Resume lets it continue. Both fail with
	// ErrNotRunning on a stopped node.
	Pause(ctx context.Context, i int) error
	Resume(ctx context.Context, i int) error

	// Partition cuts node i off from its clients until Heal. What reaches
	// the clients is implementation-defined but must be indistinguishable
	// from packet loss: requests are not answered and time out. Neither
	// touches the node's process.
	Partition(ctx context.Context, i int) error
	Heal(ctx context.Context, i int) error

	// SetLatency adds d to every round trip between clients and node i;
	// 0 removes it. d < 0 is an error.
	SetLatency(ctx context.Context, i int, d time.Duration) error

	// SetClockSkew restarts node i, with its data, under a fake wall clock
	// described by spec in libfaketime's FAKETIME syntax: "+30s" (30s
	// ahead), "-1h", "+0 x2" (runs twice as fast), "+10s x0.5". "" restarts
	// it on the real clock. The skew survives later restarts until changed.
	// A backend that cannot fake time returns an error wrapping
	// ErrNoFaketime.
	SetClockSkew(ctx context.Context, i int, spec string) error

	// Close stops every node and releases everything the Backend started.
	// Calling it again returns nil; other methods then return ErrClosed.
	Close() error
}

// Direct is an optional Backend capability: the address of node i that
// bypasses the fault proxy, so that partitions and latency do not apply
// (to inspect a node's state during a partition, say).
type Direct interface {
	DirectAddr(i int) (string, error)
}

var (
	// ErrNoNode: the node index is out of range.
	ErrNoNode = errors.New("backend: no such node")
	// ErrNotRunning: the operation needs a live node process.
	ErrNotRunning = errors.New("backend: node is not running")
	// ErrNoFaketime: clock skew needs libfaketime, which was not found.
	ErrNoFaketime = errors.New("backend: libfaketime not found (install Debian's libfaketime package)")
	// ErrClosed: the Backend was closed.
	ErrClosed = errors.New("backend: closed")
)

// Addrs returns the client addresses of b's nodes, in index order: what
// redis clients are built from.
func Addrs(b Backend) []string {
	nodes := b.Nodes()
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}
