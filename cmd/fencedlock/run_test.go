package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
)

// runArgs is `run --nodes ... --key key [flags...] -- argv...`.
func runArgs(c *cluster, key string, flags []string, argv []string) []string {
	args := append([]string{"run", "--nodes", c.nodes(), "--key", key}, flags...)
	return append(append(args, "--"), argv...)
}

// tokenOf parses the token the env helper printed.
func tokenOf(t *testing.T, stdout string) uint64 {
	t.Helper()
	for line := range strings.Lines(stdout) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "token="); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("FENCEDLOCK_TOKEN %q: %v", v, err)
			}
			return n
		}
	}
	t.Fatalf("no token in the child's output %q", stdout)
	return 0
}

func TestRunPassesTokenAndKey(t *testing.T) {
	c := newCluster(t, 3)
	const key = "job:env"
	var last uint64
	for range 2 {
		r := call(t.Context(), runArgs(c, key, nil, helper(t, "env"))...)
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		token := tokenOf(t, r.stdout)
		if !strings.Contains(r.stdout, "key="+key+"\n") {
			t.Errorf("child saw no FENCEDLOCK_KEY=%s: %q", key, r.stdout)
		}
		host, _ := os.Hostname()
		if want := fmt.Sprintf("holder=%s:%d\n", host, os.Getpid()); !strings.Contains(r.stdout, want) {
			t.Errorf("child saw no FENCEDLOCK_HOLDER (want %q): %q", want, r.stdout)
		}
		if token <= last {
			t.Errorf("token %d after token %d: not increasing", token, last)
		}
		last = token
		for i := range c.procs {
			if got := c.fence(t, i, key); got != token {
				t.Errorf("node %d: fence counter %d, child got token %d", i, got, token)
			}
		}
		waitFor(t, 5*time.Second, "the release on every node", func() bool { return c.holders(t, key) == 0 })
	}
}

func TestRunExitStatus(t *testing.T) {
	c := newCluster(t, 3)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		argv    []string
		want    int
		started bool // the lock was taken
	}{
		{"success", helper(t, "exit", "0"), 0, true},
		{"failure", helper(t, "exit", "3"), 3, true},
		{"status 75 passes through", helper(t, "exit", "75"), 75, true},
		{"killed by SIGTERM", helper(t, "kill-self"), 128 + int(syscall.SIGTERM), true},
		{"not found", []string{"fencedlock-test-no-such-command"}, exitNotFound, false},
		{"path not found", []string{filepath.Join(t.TempDir(), "missing")}, exitNotFound, false},
		{"not executable", []string{notExec}, exitCannotExec, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "job:exit:" + tc.name
			r := call(t.Context(), runArgs(c, key, nil, tc.argv)...)
			if r.code != tc.want {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tc.want, r.stderr)
			}
			waitFor(t, 5*time.Second, "the release on every node", func() bool { return c.holders(t, key) == 0 })
			taken := c.rdbs[0].Exists(t.Context(), redlock.FenceKey(key)).Val() == 1
			if taken != tc.started {
				t.Errorf("lock taken = %v, want %v", taken, tc.started)
			}
		})
	}
}

func TestRunHeldElsewhere(t *testing.T) {
	c := newCluster(t, 3)
	const key = "job:busy"
	held, err := c.locker(t).TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = held.Unlock(context.Background()) })
	cases := []struct {
		name  string
		flags []string
		msg   string
		least time.Duration
	}{
		{"no wait", nil, `lock "job:busy" is held by someone else` + "\n", 0},
		{"wait runs out", []string{"--wait", "300ms"}, "held by someone else (waited 300ms)", 300 * time.Millisecond},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t.Context(), runArgs(c, key, tc.flags, helper(t, "env"))...)
			if r.code != exitTempFail {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, exitTempFail, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.msg)
			}
			if r.stdout != "" {
				t.Errorf("the command ran without the lock: %q", r.stdout)
			}
			if r.elapsed < tc.least {
				t.Errorf("returned after %v, before --wait ran out", r.elapsed)
			}
		})
	}
}

// TestRunWaitsForRelease: a waiting `run` is woken by the holder's release,
// not by its backoff. The bound is an eighth of the backoff's cap: once a
// waiter's backoff reached the cap it sleeps a random time up to the cap, and
// polling alone takes the lock within cap/8 of a release only about a quarter
// of the time (length-biased residual of a uniform sleep: (2b·cap-b²)/cap²),
// so in all of handOvers rounds with probability below 1e-3. The silent case
// releases without the announcement and shows the bound fails on polling.
func TestRunWaitsForRelease(t *testing.T) {
	c := newCluster(t, 3)
	bound := retryCap / 8
	const handOvers = 5 // 0.234^5 < 1e-3
	// The wake-up costs a pub/sub message and one attempt; a machine on which
	// an attempt alone is near the bound cannot tell a wake from a poll.
	if rtt := attemptLatency(t, c); 4*rtt > bound {
		t.Skipf("an attempt takes %v here: too slow to tell a wake-up within %v from a poll", rtt, bound)
	}
	cases := []struct {
		name   string
		silent bool // release with a bare compare-and-delete: no announcement
	}{
		{"announced release wakes it", false},
		{"silent release: polling alone misses the bound", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "job:wait:" + tc.name
			var slowest time.Duration
			for range handOvers {
				slowest = max(slowest, handOver(t, c, key, tc.silent))
			}
			t.Logf("slowest of %d hand-overs: %v (bound %v)", handOvers, slowest, bound)
			if !tc.silent && slowest >= bound {
				t.Errorf("took the lock %v after a release, want < %v: the release did not wake it", slowest, bound)
			}
			if tc.silent && slowest < bound {
				t.Errorf("without the announcement every hand-over still took < %v: the bound does not tell a wake-up from polling", bound)
			}
		})
	}
}

// handOver holds key, starts a waiting `run`, lets its backoff reach the cap,
// releases, and returns how long the waiter took to take the lock.
func handOver(t *testing.T, c *cluster, key string, silent bool) time.Duration {
	t.Helper()
	held, err := c.locker(t).TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	calls := scriptCalls(t, c)
	ch := start(t.Context(), runArgs(c, key, []string{"--wait", "30s"}, helper(t, "exit", "0"))...)
	// First attempt, then one per backoff: the 7th comes after the 6th
	// backoff, whose ceiling is base·2^5 = the cap; every later one is the cap.
	waitFor(t, 20*time.Second, "the waiter's backoff to reach its cap", func() bool { return scriptCalls(t, c)-calls >= 7 })
	released := time.Now()
	if silent {
		for _, r := range c.rdbs {
			if err := r.Eval(t.Context(), "if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end",
				[]string{key}, held.Value()).Err(); err != nil && err != redis.Nil {
				t.Fatal(err)
			}
		}
	} else if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the waiter to take the lock", func() bool { return c.fence(t, 0, key) > held.Token() })
	took := time.Since(released)
	if r := await(t, ch, 20*time.Second); r.code != 0 {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
	return took
}

// scriptCalls counts the scripts node 0 ran (one per attempt of a waiter).
func scriptCalls(t *testing.T, c *cluster) int {
	t.Helper()
	info, err := c.rdbs[0].Info(t.Context(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(info) {
		for _, cmd := range []string{"cmdstat_evalsha:calls=", "cmdstat_eval:calls="} {
			if v, ok := strings.CutPrefix(line, cmd); ok {
				calls, _, _ := strings.Cut(v, ",")
				k, _ := strconv.Atoi(calls)
				n += k
			}
		}
	}
	return n
}

// attemptLatency is the best of a few TryLock+Unlock round trips here.
func attemptLatency(t *testing.T, c *cluster) time.Duration {
	t.Helper()
	l := c.locker(t)
	best := time.Hour
	for range 5 {
		start := time.Now()
		h, err := l.TryLock(t.Context(), "job:wait:probe", time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = h.Unlock(t.Context())
		best = min(best, time.Since(start))
	}
	return best
}

// TestRunLockLost loses the lock both ways the watchdog ends a hold. Nodes
// that die fail the extensions, which are retried: the supervisor kills the
// tree (SIGKILL) at its deadline, a fifth of --ttl before the validity's
// end, and the message names the nodes. A key gone from a quorum makes the
// next extension end the hold: the tree gets SIGTERM, SIGKILL after --grace.
func TestRunLockLost(t *testing.T) {
	const ttl = 3 * time.Second
	cases := []struct {
		name     string
		kill     bool // nodes 0 and 1 die; else the key is deleted from them
		stubborn bool // the child ignores SIGTERM
		tree     bool // the command has a child and a daemon of its own
		grace    time.Duration
		msgs     []string // besides, when nodes die, their addresses
	}{
		{"nodes die: killed at the deadline", true, false, false, 5 * time.Second,
			[]string{"lost while the command ran: extensions failed", "the command was killed (SIGKILL)"}},
		{"nodes die: the whole tree is killed", true, false, true, 5 * time.Second,
			[]string{"lost while the command ran: extensions failed", "the command was killed (SIGKILL)"}},
		{"gone on a quorum: child stops on SIGTERM", false, false, false, 5 * time.Second,
			[]string{"lost while the command ran: an extension found it on fewer than a quorum", "command ended (signal: SIGTERM)"}},
		{"gone on a quorum: SIGKILL after grace", false, true, false, 300 * time.Millisecond,
			[]string{"lost while the command ran: an extension found it on fewer than a quorum", "running 300ms after SIGTERM: SIGKILL"}},
		{"gone on a quorum: the whole tree is stopped", false, false, true, 5 * time.Second,
			[]string{"lost while the command ran: an extension found it on fewer than a quorum", "SIGTERM"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const key = "job:lost"
			c := newCluster(t, 3)
			argv, started := blockingChild(t, tc.stubborn)
			dir := t.TempDir()
			if tc.tree {
				argv = helper(t, "tree", dir)
			}
			// A node call gets ttl/20: on a loaded machine, less risks losing the
			// lock before the command runs.
			flags := []string{"--ttl", ttl.String(), "--grace", tc.grace.String()}
			ch := start(t.Context(), runArgs(c, key, flags, argv)...)
			var pids []int
			if tc.tree {
				pids = startedTree(t, dir).pids()
			} else {
				pids = []int{started()}
			}
			lost := time.Now()
			want := slices.Clone(tc.msgs)
			// The supervisor's deadline comes at most 4/5 of the ttl after the last
			// extension, which began before the nodes died; a second for the load.
			bound := ttl + time.Second
			if tc.kill {
				_ = c.procs[0].Kill()
				_ = c.procs[1].Kill()
				want = append(want, "node "+c.procs[0].Addr()+": ", "node "+c.procs[1].Addr()+": ")
			} else {
				for _, rdb := range c.rdbs[:2] {
					if err := rdb.Del(t.Context(), key).Err(); err != nil {
						t.Fatal(err)
					}
				}
				bound = ttl/3 + tc.grace + 3*time.Second // the next extension, then the grace period
			}
			r := await(t, ch, 15*time.Second)
			if r.code != exitLockLost {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, exitLockLost, r.stderr)
			}
			if d := time.Since(lost); d > bound {
				t.Errorf("the command was stopped %v after the lock was lost, want within %v", d, bound)
			}
			for _, w := range want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr %q lacks %q", r.stderr, w)
				}
			}
			for _, pid := range pids {
				if !gone(pid) {
					t.Errorf("process %d of the command still runs", pid)
				}
			}
		})
	}
}

func TestRunStopsTheCommand(t *testing.T) {
	sigterm := func(context.CancelFunc) { _ = syscall.Kill(os.Getpid(), syscall.SIGTERM) }
	cases := []struct {
		name  string
		flags []string
		stop  func(cancel context.CancelFunc)
	}{
		{"SIGTERM to fencedlock is forwarded", nil, sigterm},
		{"SIGTERM forwarded with --foreground", []string{"--foreground"}, sigterm},
		{"ctx ends", nil, func(cancel context.CancelFunc) { cancel() }},
	}
	c := newCluster(t, 3)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const key = "job:signal"
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			argv, started := blockingChild(t, false)
			ch := start(ctx, runArgs(c, key, tc.flags, argv)...)
			pid := started() // fencedlock listens for signals before it starts the child
			tc.stop(cancel)
			r := await(t, ch, 10*time.Second)
			if want := 128 + int(syscall.SIGTERM); r.code != want {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, want, r.stderr)
			}
			if !gone(pid) {
				t.Errorf("the command (pid %d) still runs", pid)
			}
			waitFor(t, 5*time.Second, "the release on every node", func() bool { return c.holders(t, key) == 0 })
		})
	}
}

func TestRunUnreachableNodes(t *testing.T) {
	cases := []struct {
		name string
		kill int
		hold bool // someone else holds the key on the live nodes
		want int
		msg  string
	}{
		{"minority down: runs", 1, false, 0, ""},
		{"minority down, held elsewhere: busy", 1, true, exitTempFail, "fencedlock: warning: node "},
		{"majority down: unavailable", 2, false, exitUnavailable, "2 of 3 nodes failed, a lock needs 2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			const key = "job:unreachable"
			c := newCluster(t, 3)
			for _, p := range c.procs[:tc.kill] {
				_ = p.Kill()
			}
			if tc.hold {
				if _, err := c.locker(t).TryLock(t.Context(), key, 30*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			r := call(t.Context(), runArgs(c, key, nil, helper(t, "env"))...)
			if r.code != tc.want {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, tc.want, r.stderr)
			}
			if r.elapsed > 3*time.Second {
				t.Errorf("took %v: dead nodes must fail fast", r.elapsed)
			}
			if tc.want == 0 {
				return
			}
			if !strings.Contains(r.stderr, tc.msg) {
				t.Errorf("stderr %q lacks %q", r.stderr, tc.msg)
			}
			for _, p := range c.procs[:tc.kill] {
				if want := "node " + p.Addr() + ": connection refused"; !strings.Contains(r.stderr, want) {
					t.Errorf("stderr %q lacks %q", r.stderr, want)
				}
			}
			if r.stdout != "" {
				t.Errorf("the command ran without the lock: %q", r.stdout)
			}
		})
	}
}
