package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunWaitForever: --wait forever waits for a held key past any first
// attempt and its backoff, and takes it when the holder releases it.
func TestRunWaitForever(t *testing.T) {
	c := newCluster(t, 3)
	const key = "job:forever"
	held, err := c.locker(t).TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	calls := scriptCalls(t, c)
	ch := start(t.Context(), runArgs(c, key, []string{"--wait", "forever"}, helper(t, "exit", "0"))...)
	// Attempts past the first show it waits; it must not have given up.
	waitFor(t, 20*time.Second, "the waiter's third attempt", func() bool { return scriptCalls(t, c)-calls >= 3 || len(ch) > 0 })
	select {
	case r := <-ch:
		t.Fatalf("returned while the key was held: exit %d, stderr %q", r.code, r.stderr)
	default:
	}
	if err := held.Unlock(t.Context()); err != nil {
		t.Fatal(err)
	}
	if r := await(t, ch, 20*time.Second); r.code != exitOK {
		t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
	}
}

// TestStatusShowsRunHolder: while a `fencedlock run` holds the key, status
// names its host and pid; a holder that is not a run has no record, and
// the record is gone once the run ends.
func TestStatusShowsRunHolder(t *testing.T) {
	c := newCluster(t, 3)
	const key = "job:who"
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	status := func(t *testing.T, extra ...string) result {
		t.Helper()
		return call(t.Context(), append([]string{"status", "--nodes", c.nodes(), "--key", key}, extra...)...)
	}

	t.Run("a run", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		argv, started := blockingChild(t, false)
		// A short ttl, for extensions within the test; loadedFlags: its
		// per-node bound is short too.
		ch := start(ctx, runArgs(c, key, loadedFlags(4*time.Second), argv)...)
		started()
		var r result
		waitFor(t, 10*time.Second, "the holder record on every node", func() bool {
			n := 0
			for _, rdb := range c.rdbs {
				if rdb.Exists(t.Context(), holderKey(key)).Val() == 1 {
					n++
				}
			}
			return n == len(c.rdbs)
		})
		r = status(t)
		if r.code != exitOK {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		// The run is this process (realMain in the test).
		want := fmt.Sprintf("holder: fencedlock run on host %s, pid %d, token %d\n", host, os.Getpid(), c.fence(t, 0, key))
		if !strings.Contains(r.stdout, want) {
			t.Errorf("status lacks %q:\n%s", want, r.stdout)
		}
		r = status(t, "--json")
		var rep statusReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v in %q", err, r.stdout)
		}
		if run := rep.Quorum.Run; run == nil || run.Host != host || run.PID != os.Getpid() || run.Value != rep.Quorum.Holder ||
			run.Token != *rep.Quorum.TokenMax {
			t.Errorf("quorum.run %+v, want host %s, pid %d, the holder's value and token (quorum %+v)", run, host, os.Getpid(), rep.Quorum)
		}
		pttl := c.rdbs[0].PTTL(t.Context(), holderKey(key)).Val()
		if lock := c.rdbs[0].PTTL(t.Context(), key).Val(); pttl <= 0 || pttl > lock {
			t.Errorf("the record lasts %v, the lock %v: want (0, the lock's]", pttl, lock)
		}
		// Each extension refreshes it (one comes at about a third of the ttl).
		waitFor(t, 10*time.Second, "the record refreshed with an extension", func() bool {
			return c.rdbs[0].PTTL(t.Context(), holderKey(key)).Val() > pttl
		})
		cancel()
		if r := await(t, ch, 10*time.Second); r.code != 128+int(syscall.SIGTERM) { // as a SIGTERM
			t.Errorf("run: exit %d, stderr %q", r.code, r.stderr)
		}
		for i, rdb := range c.rdbs {
			if rdb.Exists(t.Context(), holderKey(key)).Val() != 0 {
				t.Errorf("node %d: the holder record outlived the run", i)
			}
		}
	})

	t.Run("not a run", func(t *testing.T) {
		held, err := c.locker(t).TryLock(t.Context(), key, 30*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "the grant on every node", func() bool { return c.holders(t, key) == 3 })
		r := status(t)
		want := "holder: " + held.Value() + " has no holder record (not a 'fencedlock run', or its record did not reach the nodes)\n"
		if r.code != exitOK || !strings.Contains(r.stdout, want) {
			t.Errorf("exit %d, stdout lacks %q:\n%s", r.code, want, r.stdout)
		}
	})

	t.Run("a record of another hold", func(t *testing.T) {
		// A former holder's late refresh: its value is not the quorum's.
		stale := holderRecord{Host: "elsewhere", PID: 1, Token: 1, Value: "0000"}.String()
		for _, rdb := range c.rdbs {
			if err := rdb.Set(t.Context(), holderKey(key), stale, time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
		}
		r := status(t)
		if strings.Contains(r.stdout, "elsewhere") || !strings.Contains(r.stdout, "has no holder record") {
			t.Errorf("status shows another hold's record as the holder:\n%s", r.stdout)
		}
	})
}

func TestParseHolderRecord(t *testing.T) {
	rec := holderRecord{Host: "db-1.example", PID: 4242, Token: 18446744073709551615, Value: "0193c0de-aaaa-7bbb-8ccc-0123456789ab"}
	got, err := parseHolderRecord(rec.String())
	if err != nil || got != rec {
		t.Errorf("round trip: %+v, %v; want %+v", got, err, rec)
	}
	for _, bad := range []string{"", "host 1 2", "host pid 2 v", "host 1 -2 v", "host 1 2 v extra"} {
		if _, err := parseHolderRecord(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
