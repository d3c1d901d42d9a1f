// Package redlocktest runs real Redis nodes for the tests of code that uses
// package redlock, so that a test can take nodes away while that code holds
// a lock and check what it does: that it notices the loss
// ([github.com/fencedlock/fencedlock/redlock.Lock.Done], or the cancelled
// ctx of Do's fn) and stops. [Nodes] starts n redis-server processes on free
// loopback ports, each behind an in-process TCP proxy, and stops them when
// the test ends; each [Node] can be killed, restarted with or without its
// data, paused and partitioned from its clients, and [NodeSet.Clients] are
// ready for redlock.New. It needs redis-server installed (Debian and Ubuntu:
// the redis-server package): without it Nodes skips the test, or fails it
// when the environment has CI=true.
package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/redis/go-redis/v9"
)

// ErrNoServer is returned by New when the redis-server executable is not
// found.
var ErrNoServer = errors.New("redlocktest: redis-server not found: install it (Debian and Ubuntu: the redis-server package)")

// Nodes are independent Redis nodes, as redlock.New takes them: not replicas,
// not a cluster. Node i is ns[i], and the i-th of Clients and Addrs.
type NodeSet []*Node

// Nodes starts n nodes for t (see [New]) and closes them when t and its
// subtests end. When redis-server is missing it skips t, saying what to
// install; under CI=true (where a skip would only hide a test that did not
// run) it fails t with the same message. It fails t when the nodes do not
// start. Call it from the test's goroutine.
func Nodes(t testing.TB, n int, opts ...Option) NodeSet {
	t.Helper()
	ns, err := New(t.Context(), n, opts...)
	switch {
	case errors.Is(err, ErrNoServer) && os.Getenv("CI") != "true":
		t.Skip(err)
	case err != nil:
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Errorf("redlocktest: %v", err)
		}
	})
	return ns
}

// New starts n redis-server processes on free loopback ports, each behind a
// TCP proxy of its own on another loopback port, and a go-redis client per
// node through that proxy, with one PING already made on it. ctx bounds the
// start. It is for code without a testing.TB (an Example, a TestMain);
// tests call Nodes. The caller must call Close.
func New(ctx context.Context, n int, opts ...Option) (NodeSet, error) {
	if n < 1 {
		return nil, fmt.Errorf("redlocktest: %d nodes, want at least 1", n)
	}
	cfg := config{binary: "redis-server"}
	for _, o := range opts {
		if o == nil {
			return nil, errors.New("redlocktest: nil Option")
		}
		o(&cfg)
	}
	if _, err := exec.LookPath(cfg.binary); err != nil {
		return nil, fmt.Errorf("%w (%w)", ErrNoServer, err)
	}
	ns := make(NodeSet, 0, n)
	for i := range n {
		node, err := startNode(ctx, i, cfg)
		if err != nil {
			return nil, errors.Join(err, ns.Close())
		}
		ns = append(ns, node)
	}
	return ns, nil
}

// Clients returns each node's client (see [Node.Client]), for redlock.New.
// Close closes them.
func (ns NodeSet) Clients() []redis.UniversalClient {
	cs := make([]redis.UniversalClient, len(ns))
	for i, n := range ns {
		cs[i] = n.client
	}
	return cs
}

// Addrs returns each node's address (see [Node.Addr]), for clients of your
// own or for a program under test that takes a list of nodes.
func (ns NodeSet) Addrs() []string {
	as := make([]string, len(ns))
	for i, n := range ns {
		as[i] = n.Addr()
	}
	return as
}

// Close closes the clients, the proxies (and every connection through them)
// and stops the processes, removing their directories. It waits for the
// goroutines it started to end. Nodes calls it when the test ends.
func (ns NodeSet) Close() error {
	errs := make([]error, len(ns))
	for i, n := range ns {
		errs[i] = n.close()
	}
	return errors.Join(errs...)
}
