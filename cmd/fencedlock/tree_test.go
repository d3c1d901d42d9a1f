package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// procTree is the processes of a `tree` helper: the command, a child in its
// process group, and a daemon that left the group and the session.
type procTree struct {
	cmd, child, daemon int
}

// startedTree waits until the tree helper in dir runs, and kills what is
// left of it when the test ends (the unfixed code leaves it running).
func startedTree(t *testing.T, dir string) procTree {
	t.Helper()
	file := func(name string) string { return filepath.Join(dir, name) }
	waitFor(t, 20*time.Second, "the command's tree to start", func() bool { return readPid(file("cmd")) > 0 })
	p := procTree{cmd: readPid(file("cmd")), child: readPid(file("child")), daemon: readPid(file("daemon"))}
	t.Cleanup(func() {
		for _, pid := range p.pids() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	if sid, err := unix.Getsid(p.daemon); err == nil && sid != p.daemon { // err: already gone
		t.Fatalf("the daemon (pid %d) is in session %d, not a session of its own", p.daemon, sid)
	}
	return p
}

func (p procTree) pids() []int { return []int{p.cmd, p.child, p.daemon} }

// alive lists the processes of the tree that still run.
func (p procTree) alive() []int {
	var out []int
	for _, pid := range p.pids() {
		if !gone(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// state is the /proc state of each process of the tree: "T" when stopped.
func (p procTree) state() string {
	var b strings.Builder
	for _, pid := range p.pids() {
		b.WriteByte(procState(pid))
	}
	return b.String()
}

// TestRunKill9StopsTheTree: when fencedlock dies (kill -9), no process of its
// command's tree may run on past the lock: not the command, not its child,
// not a daemon that called setsid.
func TestRunKill9StopsTheTree(t *testing.T) {
	c := newCluster(t, 3)
	const key = "job:kill9"
	dir := t.TempDir()
	argv := helper(t, append([]string{"fencedlock"}, runArgs(c, key, loadedFlags(4*time.Second), helper(t, "tree", dir))...)...)
	fl := exec.Command(argv[0], argv[1:]...)
	var out bytes.Buffer
	fl.Stdout, fl.Stderr = &out, &out
	if err := fl.Start(); err != nil {
		t.Fatal(err)
	}
	tree := startedTree(t, dir)
	if err := fl.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = fl.Wait()
	// The lock expires on the nodes at most --ttl after fencedlock died; from
	// then on another holder can take it: the tree must be gone before.
	for len(tree.alive()) > 0 {
		if c.holders(t, key) == 0 {
			t.Fatalf("the lock expired while processes %v of the command's tree still run; output:\n%s", tree.alive(), out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRunLeftoversStopped: a command that exits 0 leaving processes behind
// (`sh -c 'job & exit 0'`): they are stopped before the lock is released.
func TestRunLeftoversStopped(t *testing.T) {
	c := newCluster(t, 3)
	const key = "job:leftovers"
	dir := t.TempDir()
	r := call(t.Context(), runArgs(c, key, []string{"--grace", "5s"}, helper(t, "tree", dir, "exit"))...)
	tree := startedTree(t, dir)
	if r.code != 0 {
		t.Fatalf("exit %d, want the command's 0; stderr %q", r.code, r.stderr)
	}
	if alive := tree.alive(); len(alive) > 0 {
		t.Errorf("fencedlock returned (and released the lock) while %v still run", alive)
	}
	if want := "left 2 processes running"; !strings.Contains(r.stderr, want) {
		t.Errorf("stderr %q lacks %q", r.stderr, want)
	}
	if n := c.holders(t, key); n != 0 {
		t.Errorf("the lock is still held on %d nodes", n)
	}
}
