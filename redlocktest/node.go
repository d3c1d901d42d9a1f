package redlocktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/holdproxy"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// ErrNotRunning is returned by Pause and Resume on a node that was killed
// (and not restarted).
var ErrNotRunning = errors.New("redlocktest: node is not running")

// warmUpTimeout bounds the first PING on a node's client: redisproc's own
// bound on a node's start, so a node that started in time answers in time.
const warmUpTimeout = 10 * time.Second

// Node is one redis-server process, behind a proxy that its clients dial:
// the proxy's address stays the same when the node restarts, and the proxy
// is what a partition cuts. A Node is safe for concurrent use.
type Node struct {
	index  int
	proc   *redisproc.Proc
	proxy  *holdproxy.Proxy
	client *redis.Client

	closeOnce sync.Once
	closeErr  error // set once by closeOnce
}

func startNode(ctx context.Context, index int, cfg config) (*Node, error) {
	proc, err := redisproc.Start(ctx, redisproc.Config{Binary: cfg.binary, AOF: cfg.aof, Args: cfg.args})
	if err != nil {
		return nil, fmt.Errorf("redlocktest: node %d: %w", index, err)
	}
	proxy, err := holdproxy.Start(proc.Addr())
	if err != nil {
		return nil, errors.Join(fmt.Errorf("redlocktest: node %d: proxy: %w", index, err), proc.Close())
	}
	n := &Node{index: index, proc: proc, proxy: proxy, client: redis.NewClient(&redis.Options{
		Addr: proxy.Addr(),
		// The lock's per-node deadlines travel in ctx: with this they also
		// free the connections of a frozen or partitioned node.
		ContextTimeoutEnabled: true,
		// A failed call is a failed node, for the lock to count: go-redis
		// would retry it on a new connection.
		MaxRetries: -1,
	})}
	// A client's first call dials; made here, it does not eat into the
	// first lock call's short per-node deadline.
	warm, cancel := context.WithTimeout(ctx, warmUpTimeout)
	defer cancel()
	if err := n.client.Ping(warm).Err(); err != nil {
		return nil, errors.Join(n.errorf("first PING: %w", err), n.close())
	}
	return n, nil
}

func (n *Node) errorf(format string, args ...any) error {
	return fmt.Errorf("redlocktest: node %d (%s): %w", n.index, n.proc.Addr(), fmt.Errorf(format, args...))
}

// Addr is the host:port that clients dial: the node's proxy.
func (n *Node) Addr() string { return n.proxy.Addr() }

// ServerAddr is the redis-server's own host:port, which a partition does not
// cut: for a test to look at what a node holds while its clients cannot.
func (n *Node) ServerAddr() string { return n.proc.Addr() }

// Client is the node's go-redis client, through the proxy, with the options
// the lock's docs advise: ContextTimeoutEnabled, so that the lock's per-node
// deadlines end a call to a frozen or partitioned node, and MaxRetries -1 (a
// failed call is not sent again: the lock decides what a failed node means).
// Closing the Nodes closes it.
func (n *Node) Client() *redis.Client { return n.client }

// Kill stops the node with SIGKILL, as a crash does, and returns once the
// process is gone. Its clients' connections close; new ones are closed as
// soon as they are accepted (the proxy still listens), until Restart.
// Killing a stopped node does nothing.
func (n *Node) Kill() error {
	if err := n.proc.Kill(); err != nil {
		return n.errorf("kill: %w", err)
	}
	return nil
}

// Restart kills the node if it runs and starts it again on the same
// address, with what it persisted, as a crashed server comes back: with
// [WithAOF], every write it acknowledged; without it, nothing (a Redis
// without persistence comes back empty). It returns once the node answers
// PING; ctx bounds that wait. A partition outlasts a restart.
func (n *Node) Restart(ctx context.Context) error { return n.restart(ctx, true) }

// RestartEmpty is Restart with the node's persisted data removed first, as
// after the loss of its disk: it comes back with no keys, [WithAOF] or not.
func (n *Node) RestartEmpty(ctx context.Context) error { return n.restart(ctx, false) }

func (n *Node) restart(ctx context.Context, withData bool) error {
	if err := n.proc.Restart(ctx, withData); err != nil {
		return n.errorf("restart: %w", err)
	}
	return nil
}

// Pause freezes the node with SIGSTOP, as a long GC or a VM freeze does: it
// accepts connections and reads nothing, so calls to it time out. Requests
// sent meanwhile wait in its socket and are carried out on Resume, even
// those whose callers gave up. Pause returns once the process is stopped.
func (n *Node) Pause() error { return n.signal("pause", n.proc.Pause) }

// Resume lets a paused node run again (SIGCONT).
func (n *Node) Resume() error { return n.signal("resume", n.proc.Resume) }

func (n *Node) signal(what string, f func() error) error {
	switch err := f(); {
	case errors.Is(err, redisproc.ErrNotRunning):
		return n.errorf("%s: %w", what, ErrNotRunning)
	case err != nil:
		return n.errorf("%s: %w", what, err)
	}
	return nil
}

// Partition cuts the node off from its clients, both ways, as a network
// partition does: the bytes that cross its proxy are dropped, so a request
// is neither carried out nor answered and the call times out (a new
// connection is accepted, and its first call times out). The node runs on,
// and can be reached at ServerAddr.
func (n *Node) Partition() { n.proxy.Partition() }

// Heal ends a partition. Connections that lost bytes to it are closed (a
// client opens new ones); idle ones carry on.
func (n *Node) Heal() { n.proxy.Heal() }

// close closes the client, the proxy and the process, once.
func (n *Node) close() error {
	n.closeOnce.Do(func() {
		n.closeErr = errors.Join(n.client.Close(), n.proxy.Close(), n.proc.Close())
	})
	return n.closeErr
}
