package scripts

import (
	"bytes"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// blockingInstall replaces the stub apt-get with one whose install writes
// the file "installing" next to the log and then runs for up to 20s, as a
// slow download would, so that the test can interrupt the script midway.
func blockingInstall(t *testing.T, e stubEnv) (installing string) {
	t.Helper()
	dir := filepath.Dir(e.log)
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	if err := os.Symlink(sleep, filepath.Join(dir, "bin", "sleep")); err != nil {
		t.Fatal(err)
	}
	installing = filepath.Join(dir, "installing")
	body := "#!" + e.bash + "\n" + `echo "${0##*/} $*" >>"$STUB_LOG"
[[ $1 == install ]] || exit 0
touch "` + installing + `"
sleep 20
`
	if err := os.WriteFile(filepath.Join(dir, "bin", "apt-get"), []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return installing
}

// TestDepsInterruptedRemovesItsPolicy: the script's policy-rc.d refuses
// every service start on the machine while it is in place, so it must be
// gone however the script ends. Each signal goes to the script's process
// group, as a terminal's Ctrl-C, a hang-up or a kill of the job would, while
// apt-get install runs.
func TestDepsInterruptedRemovesItsPolicy(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE, syscall.SIGUSR1} {
		t.Run(sig.String(), func(t *testing.T) {
			e := stubs(t)
			interrupt(t, e, blockingInstall(t, e), sig)
			if _, err := os.Stat(e.policy); !os.IsNotExist(err) {
				t.Errorf("after %v the script's policy-rc.d is left behind (%v): every service start on the machine is refused", sig, err)
			}
		})
	}
}

// interrupt runs deps.sh demo in a process group of its own, and sends sig
// to that group once the install runs; it returns once the script exited.
func interrupt(t *testing.T, e stubEnv, installing string, sig syscall.Signal) {
	t.Helper()
	caught(t, sig)
	var out bytes.Buffer
	cmd := exec.Command(e.bash, "deps.sh", "demo")
	cmd.Env = e.vars
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // the test signals only this group
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(20 * time.Second)
	// The stub's bash, like any non-interactive bash, ignores SIGQUIT: the
	// signal is sent once its sleep runs, the install's blocking part.
	for {
		if _, err := os.Stat(installing); err == nil && groupRuns(cmd.Process.Pid, "sleep") {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
			t.Fatalf("the install never started: %s", out.Bytes())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := os.Stat(e.policy); err != nil {
		t.Fatalf("no policy-rc.d during the install: %v", err)
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	timer := time.NewTimer(10 * time.Second)
	defer timer.Stop()
	select {
	case err := <-exited:
		t.Logf("deps.sh: %v", err)
	case <-timer.C:
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Fatalf("deps.sh still ran 10s after %v", sig)
	}
}

// caught has this process catch sig until the test ends, so that the
// processes it starts get sig's default action, as under a terminal. A
// signal ignored here (the test run under nohup, or in the background of a
// shell, as a CI runner may start it) stays ignored in the script, which
// cannot trap it: a hang-up then rightly leaves it running, and the test
// would tell nothing.
func caught(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if sig == syscall.SIGKILL {
		return // neither ignored nor caught
	}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	t.Cleanup(func() { signal.Stop(ch) })
}

// TestDepsRemovesThePolicyAKilledRunLeft: a run killed outright (SIGKILL: a
// CI job's timeout, the OOM killer, a power cut) cannot remove its
// policy-rc.d. The next run takes that file for the machine's own and keeps
// it: from then on every service start on the machine is refused (exit 101),
// by a file that says it is the script's and only for its install.
func TestDepsRemovesThePolicyAKilledRunLeft(t *testing.T) {
	e := stubs(t)
	apt := filepath.Join(filepath.Dir(e.log), "bin", "apt-get")
	plain, err := os.ReadFile(apt)
	if err != nil {
		t.Fatal(err)
	}
	interrupt(t, e, blockingInstall(t, e), syscall.SIGKILL)
	left, err := os.ReadFile(e.policy)
	if err != nil {
		t.Skipf("the killed run left no policy-rc.d (%v): nothing to tell", err)
	}
	if err := os.WriteFile(apt, plain, 0o755); err != nil { // the next run's install completes
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), e.bash, "deps.sh", "demo")
	cmd.Env = e.vars
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("deps.sh demo: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(e.policy); err == nil {
		t.Errorf("after the next run, the policy-rc.d a killed run left is still in place: %q (it was %q)", b, left)
	}
}

// groupRuns reports whether a process named comm runs in process group pgid.
func groupRuns(pgid int, comm string) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return true // no /proc: the marker file alone tells
	}
	for _, e := range entries {
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp ...", where comm may hold spaces
		open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(string(b[end+1:]))
		if len(f) > 2 && string(b[open+1:end]) == comm && f[2] == strconv.Itoa(pgid) {
			return true
		}
	}
	return false
}
