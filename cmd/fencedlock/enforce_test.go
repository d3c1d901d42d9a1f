package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestRunEndsTheCommandWhenTheSupervisorIsStopped: COMMAND stops its
// supervisor (as an operator's kill -STOP, or a debugger or strace attached
// to it, would), then the only node freezes, so the lock is lost. fencedlock
// holds the lock, so it enforces the lock's end: the supervisor does not
// confirm the stop, and fencedlock kills it and the command's tree itself.
func TestRunEndsTheCommandWhenTheSupervisorIsStopped(t *testing.T) {
	// A node call gets ttl/20: on a loaded machine, less risks losing the lock
	// before the node freezes.
	const ttl, grace = 3 * time.Second, time.Second
	// The lock's validity ends at most ttl after the freeze, since its last
	// extension began before it. fencedlock then asks for the stop and waits
	// grace and a kill's allowance for the supervisor to confirm; its own kill
	// gets the same allowance to take effect.
	bound := ttl + grace + 2*killAllowance(ttl)
	cases := []struct {
		name   string
		flags  []string
		daemon bool // the command starts a daemon that leaves its group and session
	}{
		{"command in a group of its own", nil, false},
		{"--foreground: command in fencedlock's group", []string{"--foreground"}, false},
		{"a daemon that left the session", nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newCluster(t, 1)
			const key = "job:stopped-supervisor"
			dir := t.TempDir()
			file := func(name string) string { return filepath.Join(dir, name) }
			argv := helper(t, "stop-parent", dir)
			if tc.daemon {
				argv = append(argv, "daemon")
			}
			flags := append(append(loadedFlags(ttl), "--grace", grace.String()), tc.flags...)
			ch := start(t.Context(), runArgs(c, key, flags, argv)...)
			waitFor(t, 20*time.Second, "the command to start", func() bool { return readPid(file("cmd")) > 0 })
			pids := []int{readPid(file("cmd"))}
			if tc.daemon {
				pids = append(pids, readPid(file("daemon")))
			}
			sup := readPid(file("sup"))
			var r *result
			t.Cleanup(func() { // the unfixed code leaves them running, and fencedlock waiting for the supervisor
				if r != nil {
					return
				}
				for _, pid := range append(pids, sup) {
					if !gone(pid) {
						_ = syscall.Kill(pid, syscall.SIGKILL)
					}
				}
				await(t, ch, 20*time.Second)
			})
			waitFor(t, 10*time.Second, "the supervisor to stop", func() bool { return procState(sup) == 'T' })
			if n := c.holders(t, key); n != 1 {
				t.Fatalf("the lock is gone before the node froze (held on %d nodes): this run cannot tell", n)
			}
			if err := c.procs[0].Pause(); err != nil {
				t.Fatal(err)
			}
			frozen, written := time.Now(), size(file("out"))
			for !allGone(pids) {
				if since := time.Since(frozen); since > bound {
					t.Fatalf("processes %v still run %v after the node froze (the command wrote %d bytes since); want them gone within %v",
						alive(pids), since.Round(time.Millisecond), size(file("out"))-written, bound)
				}
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("the command's tree ended %v after the node froze (bound %v)", time.Since(frozen).Round(time.Millisecond), bound)
			got := await(t, ch, 20*time.Second)
			r = &got
			if r.code != exitLockLost {
				t.Errorf("exit %d, want %d; stderr %q", r.code, exitLockLost, r.stderr)
			}
			if want := "did not confirm the stop"; !strings.Contains(r.stderr, want) {
				t.Errorf("stderr %q lacks %q", r.stderr, want)
			}
			if !gone(sup) {
				t.Errorf("the supervisor (pid %d) still runs", sup)
			}
		})
	}
}

func allGone(pids []int) bool { return len(alive(pids)) == 0 }

// alive lists the pids that still run.
func alive(pids []int) []int {
	var out []int
	for _, pid := range pids {
		if !gone(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// size is the length of file, or 0.
func size(file string) int64 {
	st, err := os.Stat(file)
	if err != nil {
		return 0
	}
	return st.Size()
}
