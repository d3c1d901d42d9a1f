package main

import (
	"bytes"
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/redistest"
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
	want := regexp.MustCompile(`(?s)task started under token=[1-9].*` +
		`extended by the watchdog.*extended by the watchdog.*` +
		`killed 2 of 3 nodes.*` +
		`task ctx cancelled: context canceled; the lock was lost: .*` +
		`Do returned ".*redlock: lock lost.*": errors.Is\(err, redlock.ErrLockLost\) = true`)
	if !want.MatchString(out.String()) {
		t.Errorf("output does not match %s:\n%s", want, &out)
	}
}

func TestRunWithGivenNodesOnlyExtends(t *testing.T) {
	procs := redistest.StartN(t, 3)
	args := []string{"--nodes", procs[0].Addr() + "," + procs[1].Addr() + "," + procs[2].Addr()}
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
	for i, p := range procs {
		if !p.Running() {
			t.Errorf("given node %d was stopped", i)
		}
	}
}
