package main

import (
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loadedFlags are the flags of a run with a short ttl on a loaded machine:
// --wait retries an acquisition that failed because a node was slow to
// answer within ttl/20.
func loadedFlags(ttl time.Duration) []string {
	return []string{"--ttl", ttl.String(), "--wait", "20s"}
}

// TestRunCtrlZ: Ctrl-Z on an interactive `run` stops COMMAND's whole tree
// before fencedlock itself, so nothing runs while the lock is not extended;
// fg resumes the tree if the lock is still valid, and a tree stopped past the
// lock's validity is killed, never resumed.
func TestRunCtrlZ(t *testing.T) {
	const ttl = 4 * time.Second // a node call gets ttl/20: on a loaded machine, less risks a lost lock
	cases := []struct {
		name    string
		expire  bool // stay stopped until the lock expired
		wantEnd string
	}{
		{"fg within validity resumes the tree", false, fmt.Sprintf("exited %d", 128+int(syscall.SIGTERM))},
		{"stopped past validity: the tree is killed", true, fmt.Sprintf("exited %d", exitLockLost)},
	}
	c := newCluster(t, 3)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			key := "job:ctrl-z:" + tc.name
			dir := t.TempDir()
			j := startJob(t, runArgs(c, key, loadedFlags(ttl), helper(t, "tree", dir))...)
			j.waitFor(t, "the command's tree to start", func() bool { return readPid(filepath.Join(dir, "cmd")) > 0 })
			tree := startedTree(t, dir)
			j.press(t, "\x1a")
			j.event(t, ttl, "stopped ")
			// fencedlock stops only once the tree is stopped.
			if st := tree.state(); st != "TTT" {
				t.Fatalf("fencedlock stopped while its command's tree is in states %q (cmd, child, daemon), want all T", st)
			}
			if tc.expire {
				// Stopped, fencedlock extends nothing and the lock expires.
				// The stopped tree must then be killed before anyone can
				// continue it (fg here).
				waitFor(t, 3*ttl, "the lock to expire", func() bool { return c.holders(t, key) == 0 })
				waitFor(t, ttl, "the stopped tree to be killed", func() bool { return len(tree.alive()) == 0 })
			} else if n := c.holders(t, key); n < 2 {
				t.Fatalf("the lock is held on %d nodes after a short stop", n)
			}
			j.fg(t)
			if !tc.expire {
				waitFor(t, ttl, "the tree to run again", func() bool { return !strings.Contains(tree.state(), "T") })
				if err := syscall.Kill(j.pid, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
			}
			if e := j.event(t, 3*ttl, "exited "); e != tc.wantEnd {
				t.Errorf("job %s, want %s; terminal:\n%s", e, tc.wantEnd, j.output())
			}
			if alive := tree.alive(); len(alive) > 0 {
				t.Errorf("%v still run after fencedlock ended", alive)
			}
		})
	}
}

// TestRunCommandStoppedByTerminalRead: a COMMAND in its own process group
// (no --foreground) that reads the terminal is stopped by SIGTTIN. A stopped
// command must not hold the lock: fencedlock stops it and releases the lock.
func TestRunCommandStoppedByTerminalRead(t *testing.T) {
	const ttl = 4 * time.Second
	c := newCluster(t, 3)
	const key = "job:ttin"
	file := filepath.Join(t.TempDir(), "reader")
	j := startJob(t, runArgs(c, key, loadedFlags(ttl), helper(t, "read-stdin", file))...)
	j.waitFor(t, "the command to start", func() bool { return readPid(file) > 0 })
	pid := readPid(file)
	// Unfixed, the watchdog extends the lock of the stopped command for
	// ever: after 3 TTLs it still holds it.
	want := fmt.Sprintf("exited %d", 128+int(syscall.SIGTTIN))
	if e := j.event(t, 3*ttl, "exited "); e != want {
		t.Errorf("job %s, want %s; terminal:\n%s", e, want, j.output())
	}
	// The exit comes on the events pipe, the message on the terminal: the
	// terminal's last output may still be on its way.
	for _, msg := range []string{"stopped by SIGTTIN", "--foreground"} {
		for deadline := time.Now().Add(ttl); !strings.Contains(j.output(), msg); {
			if time.Now().After(deadline) {
				t.Errorf("terminal lacks %q:\n%s", msg, j.output())
				break
			}
			time.Sleep(5 * time.Millisecond) // polling the terminal's output, bounded
		}
	}
	if !gone(pid) {
		t.Errorf("the command (pid %d) still exists", pid)
	}
	if n := c.holders(t, key); n != 0 {
		t.Errorf("the lock is still held on %d nodes", n)
	}
}

// TestRunForegroundCtrlCOnce: with --foreground, COMMAND shares the
// terminal's foreground group, so Ctrl-C reaches it from the terminal;
// fencedlock must not pass the same SIGINT on a second time.
func TestRunForegroundCtrlCOnce(t *testing.T) {
	c := newCluster(t, 3)
	file := filepath.Join(t.TempDir(), "sigints")
	j := startJob(t, runArgs(c, "job:ctrl-c", append(loadedFlags(10*time.Second), "--foreground"), helper(t, "count-sigint", file))...)
	j.waitFor(t, "the command to start", func() bool { return readPid(file+".pid") > 0 })
	// Hold fencedlock still while the command sees the terminal's SIGINT, so
	// that a copy from fencedlock cannot merge with it into one signal.
	if err := syscall.Kill(j.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "fencedlock to stop", func() bool { return procState(j.pid) == 'T' })
	j.press(t, "\x03")
	waitFor(t, 5*time.Second, "the command to get SIGINT", func() bool { return readPid(file) == 1 })
	if err := syscall.Kill(j.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// SIGTERM is passed on after any SIGINT fencedlock passes on (lower
	// signal numbers are delivered first), so the count is final then.
	if err := syscall.Kill(j.pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	j.event(t, 10*time.Second, "exited ")
	if n := readPid(file + ".final"); n != 1 {
		t.Errorf("the command got %d SIGINTs for one Ctrl-C", n)
	}
}
