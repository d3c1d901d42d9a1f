package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/redlocktest"
)

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quietLogger{}) // dial failures to the killed nodes are the point here
	goleak.VerifyTestMain(m)
}

func TestRunCancelsTheTaskWhenAMajorityDies(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), nil, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	s := out.String()
	// Only the loss may cancel the task: killed nodes do not say the hold
	// is gone, so the watchdog retries until the validity runs out.
	want := regexp.MustCompile(`(?s)task started under token=[1-9].*` +
		`extended by the watchdog.*extended by the watchdog.*` +
		`t=\+(\d+)ms +killed 2 of 3 nodes.*` +
		`t=\+(\d+)ms +task ctx cancelled: context canceled; the lock was lost: ` +
		`its validity ran out while extensions failed \(fewer than 2 of 3 nodes answered\)\n.*` +
		`Do returned ".*redlock: lock lost.*": errors.Is\(err, redlock.ErrLockLost\) = true`)
	m := want.FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("output does not match %s:\n%s", want, s)
	}
	ttl, nodeTimeout := durationIn(t, s, `ttl=(\S+):`), durationIn(t, s, `node timeout=(\S+)\n`)
	killed, cancelled := msIn(t, m[1]), msIn(t, m[2])
	// Cancelled when the validity ran out: at most a TTL after the kill
	// (the validity left then), and the watchdog's clock and the scheduler's
	// turn after it, bounded by a few node timeouts.
	if took, bound := cancelled-killed, ttl+4*nodeTimeout; took > bound {
		t.Errorf("the task was cancelled %v after the kill, want within %v (ttl %v):\n%s", took, bound, ttl, s)
	}
}

// durationIn parses the duration that pattern's group matches in s.
func durationIn(t *testing.T, s, pattern string) time.Duration {
	t.Helper()
	m := regexp.MustCompile(pattern).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("output lacks %s:\n%s", pattern, s)
	}
	d, err := time.ParseDuration(m[1])
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func msIn(t *testing.T, digits string) time.Duration {
	t.Helper()
	n, err := strconv.Atoi(digits)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(n) * time.Millisecond
}

func TestRunWithGivenNodesOnlyExtends(t *testing.T) {
	nodes := redlocktest.Nodes(t, 3)
	args := []string{"--nodes", strings.Join(nodes.Addrs(), ",")}
	var out bytes.Buffer
	if err := run(t.Context(), args, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	s := out.String()
	if n := strings.Count(s, "extended by the watchdog"); n < 9 {
		t.Errorf("%d extensions, want at least 9:\n%s", n, s)
	}
	for _, w := range []string{"task done after 3 TTLs on 9 extensions", "Do returned nil: task finished, lock released"} {
		if !strings.Contains(s, w) {
			t.Errorf("output lacks %q:\n%s", w, s)
		}
	}
	for _, bad := range []string{"killed", "cancelled"} {
		if strings.Contains(s, bad) {
			t.Errorf("output has %q, but no node was to be harmed:\n%s", bad, s)
		}
	}
	for i, c := range nodes.Clients() {
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Errorf("given node %d no longer answers: %v", i, err)
		}
	}
}
