package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fencedlock/fencedlock/redlock"
)

// defaultNodeTimeout bounds dialing a node and each call to it, so that a
// dead or blackholed node costs the CLI half a second, not go-redis's 5s.
const defaultNodeTimeout = 500 * time.Millisecond

// nodeFlags are the flags of every command that talks to the nodes.
type nodeFlags struct {
	nodes   string
	key     string
	timeout time.Duration
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.nodes, "nodes", "", "comma-separated Redis `ADDRS`: host:port or redis://[user:password@]host:port[/db] (required)")
	fs.StringVar(&f.key, "key", "", "the lock `KEY` (required)")
	fs.DurationVar(&f.timeout, "node-timeout", defaultNodeTimeout, "bound on dialing a node and on each call to it")
}

// options checks the flags and returns one go-redis config per node.
func (f *nodeFlags) options() ([]*redis.Options, error) {
	switch {
	case f.nodes == "":
		return nil, errors.New("--nodes is required")
	case f.key == "":
		return nil, errors.New("--key is required")
	case f.timeout <= 0:
		return nil, fmt.Errorf("--node-timeout %v is not positive", f.timeout)
	}
	return parseNodes(f.nodes, f.timeout)
}

// parseNodes parses a comma-separated list of nodes. The same server twice
// is an error: it would count twice toward the quorum.
func parseNodes(list string, timeout time.Duration) ([]*redis.Options, error) {
	var opts []*redis.Options
	seen := make(map[string]bool)
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("--nodes %q has an empty entry", list)
		}
		o, err := parseNode(s)
		if err != nil {
			return nil, err
		}
		if seen[o.Addr] {
			return nil, fmt.Errorf("node %s is given twice in --nodes (it would count twice toward the quorum)", o.Addr)
		}
		seen[o.Addr] = true
		o.DialTimeout = timeout
		o.ReadTimeout = timeout
		o.WriteTimeout = timeout
		o.ContextTimeoutEnabled = true // the lock's per-node deadlines travel in ctx
		o.MaxRetries = -1              // a failed call is a failed node: no retries
		o.DialerRetries = 1            // go-redis would otherwise dial a dead node 5 times
		o.DisableIdentity = true
		o.MaintNotificationsConfig = &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
		opts = append(opts, o)
	}
	return opts, nil
}

func parseNode(s string) (*redis.Options, error) {
	if strings.Contains(s, "://") {
		o, err := redis.ParseURL(s)
		if err != nil {
			return nil, fmt.Errorf("node %q: %w", s, err)
		}
		if o.Network != "tcp" {
			return nil, fmt.Errorf("node %q: only redis:// and rediss:// URLs are supported", s)
		}
		return o, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, fmt.Errorf("node %q is not host:port: %w", s, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("node %q: bad port %q", s, port)
	}
	if host == "" {
		return nil, fmt.Errorf("node %q has no host", s)
	}
	return &redis.Options{Addr: s}, nil
}

// dial returns a client per node. Clients connect lazily: a node that is
// down shows up as an error on its first call, not here.
func dial(opts []*redis.Options) []*redis.Client {
	cs := make([]*redis.Client, len(opts))
	for i, o := range opts {
		cs[i] = redis.NewClient(o)
	}
	return cs
}

func universal(cs []*redis.Client) []redis.UniversalClient {
	u := make([]redis.UniversalClient, len(cs))
	for i, c := range cs {
		u[i] = c
	}
	return u
}

func closeAll(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// describe says briefly why a node failed: "connection refused", "timeout",
// or the error's own text.
func describe(err error) string {
	if ne, ok := errors.AsType[*redlock.NodeError](err); ok {
		err = ne.Err
	}
	var nerr net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &nerr) && nerr.Timeout(),
		strings.HasSuffix(err.Error(), "timeout"): // the lock client's own per-node deadline
		return "timeout"
	}
	return err.Error()
}

// nodeLog remembers the latest error of each node, as reported by the lock
// client. It is safe for concurrent use.
type nodeLog struct {
	redlock.NopObserver

	mu   sync.Mutex        // protects errs
	errs map[string]string // node address → what went wrong
}

func (l *nodeLog) NodeError(err *redlock.NodeError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.errs == nil {
		l.errs = make(map[string]string)
	}
	l.errs[err.Addr] = describe(err)
}

// failed lists the nodes that failed since the last reset, in the order of
// addrs, as "node ADDR: reason".
func (l *nodeLog) failed(addrs []string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, a := range addrs {
		if why, ok := l.errs[a]; ok {
			out = append(out, fmt.Sprintf("node %s: %s", a, why))
		}
	}
	return out
}

func (l *nodeLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	clear(l.errs)
}

func addrsOf(opts []*redis.Options) []string {
	a := make([]string, len(opts))
	for i, o := range opts {
		a[i] = o.Addr
	}
	return a
}
