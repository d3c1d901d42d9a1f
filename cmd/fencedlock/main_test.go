package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/internal/redistest"
	"github.com/fencedlock/fencedlock/redlock"
)

// helperArg, as the first argument, makes the test binary act as the
// command that `run` starts (see helperMain), so the tests need no shell.
const helperArg = "fencedlock-test-helper"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == helperArg {
		// syscall.Exit, not os.Exit: under -race, os.Exit(0) waits a second
		// for the race detector's report (GORACE atexit_sleep_ms).
		syscall.Exit(helperMain(os.Args[2:]))
	}
	if isSupervisor() { // realMain's runs start the test binary as their supervisor
		syscall.Exit(supervisorMain())
	}
	redis.SetLogger(quietLogger{})            // dial failures to killed nodes are expected here
	if status, ok := chaos.ClientMain(); ok { // chaos runs with --client-procs start the test binary as their clients
		syscall.Exit(status)
	}
	goleak.VerifyTestMain(m)
}

// helper returns the argv that runs the test binary as helperMain.
func helper(t *testing.T, args ...string) []string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{exe, helperArg}, args...)
}

// result is what one realMain call returned.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

// call runs realMain with args.
func call(ctx context.Context, args ...string) result {
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := realMain(ctx, args, &stdout, &stderr)
	return result{code: code, stdout: stdout.String(), stderr: stderr.String(), elapsed: time.Since(start)}
}

// start runs realMain in the background; the channel yields its result.
func start(ctx context.Context, args ...string) <-chan result {
	ch := make(chan result, 1)
	go func() { ch <- call(ctx, args...) }()
	return ch
}

// await returns the result of start, failing the test after d.
func await(t *testing.T, ch <-chan result, d time.Duration) result {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r
	case <-timer.C:
		t.Fatalf("fencedlock did not return within %v", d)
		return result{}
	}
}

// cluster is a set of real redis-server nodes.
type cluster struct {
	procs []*redisproc.Proc
	rdbs  []*redis.Client
}

func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{procs: redistest.StartN(t, n)}
	for _, p := range c.procs {
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		c.rdbs = append(c.rdbs, rdb)
	}
	return c
}

// nodes is the --nodes value.
func (c *cluster) nodes() string {
	addrs := make([]string, len(c.procs))
	for i, p := range c.procs {
		addrs[i] = p.Addr()
	}
	return strings.Join(addrs, ",")
}

// locker returns a lock client on the cluster, for holding keys in tests.
func (c *cluster) locker(t *testing.T) *redlock.Client {
	t.Helper()
	u := make([]redis.UniversalClient, len(c.rdbs))
	for i, r := range c.rdbs {
		u[i] = r
	}
	l, err := redlock.New(u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l
}

// holders counts the live nodes on which key exists.
func (c *cluster) holders(t *testing.T, key string) int {
	t.Helper()
	n := 0
	for i, r := range c.rdbs {
		if c.procs[i].Running() && r.Exists(t.Context(), key).Val() == 1 {
			n++
		}
	}
	return n
}

// fence is the fence counter of key's slot on node i.
func (c *cluster) fence(t *testing.T, i int, key string) uint64 {
	t.Helper()
	n, err := c.rdbs[i].Get(t.Context(), redlock.FenceKey(key)).Uint64()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// blockingChild returns the argv of a child that blocks for 30s, and a
// function that waits until it runs and returns its pid.
func blockingChild(t *testing.T, stubborn bool) ([]string, func() int) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "child.pid")
	argv := helper(t, "block", file)
	if stubborn {
		argv = append(argv, "stubborn")
	}
	return argv, func() int {
		t.Helper()
		var pid int
		waitFor(t, 10*time.Second, "the child to start", func() bool {
			b, err := os.ReadFile(file)
			pid, _ = strconv.Atoi(string(b))
			return err == nil && pid > 0
		})
		return pid
	}
}

// gone reports whether no process has pid any more, or only its zombie (a
// process whose parent died is reaped by whoever adopted it, in its own time).
func gone(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return true
	}
	return procState(pid) == 'Z'
}

// procState is the state letter of pid in /proc (R, S, T, Z, ...), or 0.
func procState(pid int) byte {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(b, ')') // after the command name, which may hold ')'
	if i < 0 || i+2 >= len(b) {
		return 0
	}
	return b[i+2]
}
