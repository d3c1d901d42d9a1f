package main

import (
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/fencedlock/fencedlock/internal/doctor"
	"github.com/fencedlock/fencedlock/redlock"
)

// defaultNodeTimeout bounds dialing a node and each call to it, so that a
// dead or blackholed node costs the CLI half a second, not go-redis's 5s.
const defaultNodeTimeout = 500 * time.Millisecond

// nodesHelp is the help of --nodes in the commands that talk to the nodes.
const nodesHelp = "comma-separated Redis node `ADDRS`: host:port or redis://[user:password@]host:port[/db] " +
	"(default $FENCEDLOCK_NODES; a password in a URL shows in ps: use --password-file or $FENCEDLOCK_PASSWORD)"

// nodesEnvHelp is the part of a command's help that says where the nodes
// and their password come from.
const nodesEnvHelp = `Nodes and password:
  --nodes ADDRS is a list of node addresses (not a count, as in 'fencedlock
  chaos'). Without --nodes, FENCEDLOCK_NODES is read (the same syntax).
  A password inside a redis:// URL shows in ps and in the shell's history:
  put it in a file (--password-file FILE, its first line) or in
  FENCEDLOCK_PASSWORD instead. Each node's password is, first to last: the
  one in its URL, --password-file, FENCEDLOCK_PASSWORD; none when all are
  absent.
`

// nodeSource is where a command's nodes and their password come from: the
// flags, else the environment.
type nodeSource struct {
	nodes        string
	passwordFile string
}

func (s *nodeSource) register(fs *flag.FlagSet) {
	fs.StringVar(&s.nodes, "nodes", "", nodesHelp)
	fs.StringVar(&s.passwordFile, "password-file", "", "read the nodes' password from the first line of `FILE` (default $FENCEDLOCK_PASSWORD)")
}

// options returns one go-redis config per node, with the password applied
// to the nodes whose URL has none. getenv is os.Getenv but in tests.
func (s *nodeSource) options(timeout time.Duration, getenv func(string) string) ([]*redis.Options, error) {
	list, from := s.nodes, "--nodes"
	if list == "" {
		list, from = getenv("FENCEDLOCK_NODES"), "FENCEDLOCK_NODES"
	}
	if list == "" {
		return nil, errors.New("--nodes is required (or FENCEDLOCK_NODES): a comma-separated list of node addresses")
	}
	if _, err := strconv.ParseUint(strings.TrimSpace(list), 10, 64); err == nil {
		return nil, fmt.Errorf("%s takes a comma-separated list of node addresses (e.g. 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379), not a count", from)
	}
	opts, err := parseNodes(list, timeout)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", from, err)
	}
	password, err := s.password(getenv)
	if err != nil {
		return nil, err
	}
	for _, o := range opts {
		if o.Password == "" {
			o.Password = password
		}
	}
	return opts, nil
}

// password is the password of --password-file, else FENCEDLOCK_PASSWORD.
func (s *nodeSource) password(getenv func(string) string) (string, error) {
	if s.passwordFile == "" {
		return getenv("FENCEDLOCK_PASSWORD"), nil
	}
	b, err := os.ReadFile(s.passwordFile)
	if err != nil {
		return "", fmt.Errorf("--password-file: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	line = strings.TrimSuffix(line, "\r")
	if line == "" {
		return "", fmt.Errorf("--password-file %s: the first line is empty", s.passwordFile)
	}
	return line, nil
}

// nodeFlags are the flags of the commands that lock or read a key.
type nodeFlags struct {
	nodeSource
	key     string
	timeout time.Duration
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	f.nodeSource.register(fs)
	fs.StringVar(&f.key, "key", "", "the lock `KEY` (required)")
	fs.DurationVar(&f.timeout, "node-timeout", defaultNodeTimeout, "bound on dialing a node and on each call to it")
}

// options checks the flags and returns one go-redis config per node.
func (f *nodeFlags) options(getenv func(string) string) ([]*redis.Options, error) {
	switch {
	case f.key == "":
		return nil, errors.New("--key is required")
	case f.timeout <= 0:
		return nil, fmt.Errorf("--node-timeout %v is not positive", f.timeout)
	}
	return f.nodeSource.options(f.timeout, getenv)
}

// parseNodes parses a comma-separated list of nodes. The same server twice
// is an error: it would count twice toward the quorum.
func parseNodes(list string, timeout time.Duration) ([]*redis.Options, error) {
	var opts []*redis.Options
	seen := make(map[string]bool)
	for s := range strings.SplitSeq(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			return nil, fmt.Errorf("%q has an empty entry", list)
		}
		o, err := parseNode(s)
		if err != nil {
			return nil, err
		}
		if seen[o.Addr] {
			return nil, fmt.Errorf("node %s is given twice (it would count twice toward the quorum)", o.Addr)
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
// or the error's own text (doctor.Why, and the lock client's own per-node
// deadline, which wraps no net error).
func describe(err error) string {
	if ne, ok := errors.AsType[*redlock.NodeError](err); ok {
		err = ne.Err
	}
	if strings.HasSuffix(err.Error(), "timeout") {
		return "timeout"
	}
	return doctor.Why(err)
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

// countFlag is --nodes where it is a count (chaos, check). Set takes any
// text, so that value can tell a list of addresses, given by mistake, from a
// bad number, and say what the flag wants instead.
type countFlag struct {
	raw string
	n   int
}

func (c *countFlag) String() string {
	if c == nil { // the zero value flag.PrintDefaults makes
		return "0"
	}
	if c.raw == "" {
		return strconv.Itoa(c.n)
	}
	return c.raw
}

func (c *countFlag) Set(s string) error {
	c.raw = s
	return nil
}

// value is the count, or an error that says what the flag takes: a count
// of wants ("nodes to start"), and, when it was given addresses, instead
// (what to do with addresses).
func (c *countFlag) value(wants, instead string) (int, error) {
	if c.raw == "" {
		return c.n, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(c.raw))
	switch {
	case err != nil && strings.ContainsAny(c.raw, ":,/."):
		return 0, fmt.Errorf("--nodes takes a count of %s (e.g. --nodes 5), not addresses; %s", wants, instead)
	case err != nil:
		return 0, fmt.Errorf("--nodes %q is not a count of %s (e.g. --nodes 5)", c.raw, wants)
	}
	return n, nil
}
