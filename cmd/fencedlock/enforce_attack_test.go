package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunStoppedSupervisorOutlivesTheLock: the job must not outlive its lock
// (docs/cli.md). With a running supervisor the tree is killed a tenth of --ttl
// before the lock's validity ends, whatever --grace is (the supervisor's
// deadline bounds it). With a stopped supervisor, fencedlock's own
// enforcement waits --grace and a tenth of --ttl after it saw the lock lost,
// which is at the end of validity: the command writes on while another
// client holds the lock.
func TestRunStoppedSupervisorOutlivesTheLock(t *testing.T) {
	const ttl, grace = 3 * time.Second, 2 * time.Second
	cases := []struct {
		name    string
		stopped bool // the command stops its supervisor
	}{
		{"running supervisor: killed before the validity ends", false},
		{"stopped supervisor: killed before the validity ends", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1)
			const key = "job:outlive"
			dir := t.TempDir()
			file := func(name string) string { return filepath.Join(dir, name) }
			argv := helper(t, "block", file("cmd"))
			if tc.stopped {
				argv = helper(t, "stop-parent", dir)
			}
			flags := append(loadedFlags(ttl), "--grace", grace.String())
			ch := start(t.Context(), runArgs(c, key, flags, argv)...)
			waitFor(t, 20*time.Second, "the command to start", func() bool { return readPid(file("cmd")) > 0 })
			pid := readPid(file("cmd"))
			sup := 0
			if tc.stopped {
				sup = readPid(file("sup"))
				waitFor(t, 10*time.Second, "the supervisor to stop", func() bool { return procState(sup) == 'T' })
			}
			t.Cleanup(func() {
				for _, p := range []int{pid, sup} {
					if p > 0 && !gone(p) {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
				}
				await(t, ch, 20*time.Second)
			})
			// The key's expiry on the node bounds the lock's validity: fencedlock's
			// Until() is never later (DESIGN: Until() ≤ what a quorum may hold).
			pttl, err := c.rdbs[0].PTTL(t.Context(), key).Result()
			if err != nil || pttl <= 0 {
				t.Fatalf("PTTL %v, %v: the lock is gone before the node froze: this run cannot tell", pttl, err)
			}
			expiry := time.Now().Add(pttl + 5*time.Millisecond)
			if err := c.procs[0].Pause(); err != nil {
				t.Fatal(err)
			}
			for !gone(pid) && time.Now().Before(expiry) {
				time.Sleep(5 * time.Millisecond)
			}
			if err := c.procs[0].Resume(); err != nil {
				t.Fatal(err)
			}
			if gone(pid) {
				return
			}
			// The key has expired on the only node: another client takes the lock.
			other, err := c.locker(t).TryLock(context.Background(), key, 10*time.Second)
			if err != nil {
				t.Fatalf("the command (pid %d) runs past the lock's validity, and another TryLock failed: %v", pid, err)
			}
			defer func() { _ = other.Unlock(context.Background()) }()
			written := size(file("out"))
			deadline := time.Now().Add(time.Second)
			for !gone(pid) && size(file("out")) == written && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
			}
			if gone(pid) {
				return
			}
			for !gone(pid) && time.Since(expiry) < 10*time.Second { // for the message: when the tree ends
				time.Sleep(5 * time.Millisecond)
			}
			wrote := size(file("out")) - written
			t.Fatalf("the command (pid %d) wrote %d bytes after the lock's validity ended, while another client held the lock (token %d); it ended %v after the validity (gone: %v)",
				pid, wrote, other.Token(), time.Since(expiry).Round(time.Millisecond), gone(pid))
		})
	}
}

// TestRunSignalReachesTheCommandOfAStoppedSupervisor: "SIGINT, SIGTERM,
// SIGHUP and SIGQUIT sent to fencedlock are passed on to COMMAND's process
// group" (run --help). fencedlock passes them on through the supervisor
// only; a stopped supervisor passes nothing on, and nothing holds it to it:
// the command runs on, and fencedlock extends the lock for as long as the
// supervisor stays stopped.
func TestRunSignalReachesTheCommandOfAStoppedSupervisor(t *testing.T) {
	const ttl, grace = 3 * time.Second, time.Second
	c := newCluster(t, 3)
	const key = "job:stopped-supervisor-sigterm"
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	flags := append(loadedFlags(ttl), "--grace", grace.String())
	ch := start(t.Context(), runArgs(c, key, flags, helper(t, "stop-parent", dir))...)
	waitFor(t, 20*time.Second, "the command to start", func() bool { return readPid(file("cmd")) > 0 })
	pid, sup := readPid(file("cmd")), readPid(file("sup"))
	t.Cleanup(func() {
		for _, p := range []int{pid, sup} {
			if !gone(p) {
				_ = syscall.Kill(p, syscall.SIGKILL)
			}
		}
		await(t, ch, 20*time.Second)
	})
	waitFor(t, 10*time.Second, "the supervisor to stop", func() bool { return procState(sup) == 'T' })
	_ = syscall.Kill(syscall.Getpid(), syscall.SIGTERM) // to fencedlock, which runs in this process and catches it
	sent := time.Now()
	// What fencedlock gives a supervisor to confirm a stop, and a kill's allowance more.
	bound := grace + 2*killAllowance(ttl)
	for !gone(pid) {
		if since := time.Since(sent); since > bound {
			t.Fatalf("the command (pid %d) still runs %v after SIGTERM to fencedlock; the lock is held on %d of 3 nodes",
				pid, since.Round(time.Millisecond), c.holders(t, key))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunCommandEndsUnderAStoppedSupervisor: COMMAND stops its supervisor
// and exits. A stopped supervisor reaps nothing and reports nothing, so
// fencedlock, which sees COMMAND end itself, holds it to the report: with
// none within a kill allowance, it ends the supervisor and releases the
// lock, rather than extending it for as long as the supervisor stays
// stopped.
func TestRunCommandEndsUnderAStoppedSupervisor(t *testing.T) {
	const ttl = 3 * time.Second
	c := newCluster(t, 3)
	const key = "job:stopped-supervisor-exit"
	dir := t.TempDir()
	file := func(name string) string { return filepath.Join(dir, name) }
	ch := start(t.Context(), runArgs(c, key, loadedFlags(ttl), helper(t, "stop-parent", dir, "exit"))...)
	waitFor(t, 20*time.Second, "the command to start", func() bool { return readPid(file("cmd")) > 0 })
	pid, sup := readPid(file("cmd")), readPid(file("sup"))
	var r *result
	t.Cleanup(func() {
		if r != nil {
			return
		}
		if !gone(sup) {
			_ = syscall.Kill(sup, syscall.SIGKILL)
		}
		await(t, ch, 20*time.Second)
	})
	waitFor(t, 10*time.Second, "the command to end", func() bool { return gone(pid) })
	ended := time.Now()
	// COMMAND sent SIGSTOP before it exited; on a loaded machine the stop
	// may show a moment after the exit. Looked for no longer than the kill
	// allowance, within which fencedlock leaves the supervisor alone.
	for stopBy := ended.Add(killAllowance(ttl)); procState(sup) != 'T'; time.Sleep(time.Millisecond) {
		if time.Now().After(stopBy) {
			t.Fatalf("the supervisor (pid %d) is not stopped (state %q): this run cannot tell", sup, procState(sup))
		}
	}
	// The report is due a kill allowance after the end; the kill of the
	// supervisor and the release are given another.
	bound := 2 * killAllowance(ttl)
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case got := <-ch:
		r = &got
	case <-timer.C:
		t.Fatalf("fencedlock still runs %v after the command ended under a stopped supervisor; the lock is held on %d of 3 nodes",
			bound, c.holders(t, key))
	}
	t.Logf("fencedlock returned %v after the command ended (bound %v)", time.Since(ended).Round(time.Millisecond), bound)
	if r.code != exitFailure {
		t.Errorf("exit %d, want %d; stderr %q", r.code, exitFailure, r.stderr)
	}
	if want := "did not report the command's end"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q lacks %q", r.stderr, want)
	}
	if n := c.holders(t, key); n != 0 {
		t.Errorf("the lock is still held on %d of 3 nodes", n)
	}
	if !gone(sup) {
		t.Errorf("the supervisor (pid %d) still runs", sup)
	}
}
