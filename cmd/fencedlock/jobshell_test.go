package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"
)

// jobShellMain is what an interactive shell does for one foreground job: it
// leads the session of its terminal (its stdin), starts ARGV in a process
// group of its own, gives that group the terminal, and reports on fd 4 when
// the job stops, continues and exits. "fg" on fd 3 continues the job, as
// the shell's fg does (SIGCONT to its group). It never takes the terminal
// back, so that keys typed later still reach the job's group.
func jobShellMain(argv []string) int {
	ctl, events := os.NewFile(3, "ctl"), os.NewFile(4, "events")
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		return fail(err)
	}
	pid := cmd.Process.Pid
	fmt.Fprintf(events, "pid %d\n", pid)
	go func() {
		sc := bufio.NewScanner(ctl)
		for sc.Scan() {
			if sc.Text() == "fg" {
				_ = syscall.Kill(-pid, syscall.SIGCONT)
			}
		}
	}()
	for {
		var ws syscall.WaitStatus
		if _, err := syscall.Wait4(pid, &ws, syscall.WUNTRACED|syscall.WCONTINUED, nil); err != nil {
			if err == syscall.EINTR {
				continue
			}
			return fail(err)
		}
		switch {
		case ws.Stopped():
			fmt.Fprintf(events, "stopped %d\n", int(ws.StopSignal()))
		case ws.Continued():
			fmt.Fprintln(events, "continued")
		case ws.Exited():
			fmt.Fprintf(events, "exited %d\n", ws.ExitStatus())
			return 0
		case ws.Signaled():
			fmt.Fprintf(events, "exited %d\n", 128+int(ws.Signal()))
			return 0
		}
	}
}

// jobShell is a job started by jobShellMain on a real pseudo-terminal: the
// test types at it as a user would, and reads what the terminal shows.
type jobShell struct {
	pty    *os.File // the terminal's master side: keys in, output out
	ctl    *os.File
	events chan string
	pid    int // the job's: fencedlock

	mu  sync.Mutex // protects out
	out bytes.Buffer
}

// startJob runs `fencedlock ARGS...` as the foreground job of a job shell on
// a new terminal.
func startJob(t *testing.T, args ...string) *jobShell {
	t.Helper()
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	evR, evW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	argv := append(helper(t, "jobshell", "--"), helper(t, append([]string{"fencedlock"}, args...)...)...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.ExtraFiles = []*os.File{ctlR, evW}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	_ = tty.Close()
	_ = ctlR.Close()
	_ = evW.Close()
	j := &jobShell{pty: ptmx, ctl: ctlW, events: make(chan string, 16)}
	var wg sync.WaitGroup
	wg.Go(func() { _, _ = io.Copy(j, ptmx) }) // ends with EIO once the terminal has no process left
	wg.Go(func() {
		defer close(j.events)
		sc := bufio.NewScanner(evR)
		for sc.Scan() {
			j.events <- sc.Text()
		}
	})
	t.Cleanup(func() {
		if j.pid > 0 {
			_ = syscall.Kill(-j.pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = ctlW.Close()
		_ = ptmx.Close()
		_ = evR.Close()
		wg.Wait()
	})
	e := j.event(t, 10*time.Second, "pid ")
	if _, err := fmt.Sscanf(e, "pid %d", &j.pid); err != nil {
		t.Fatalf("job shell: %q: %v", e, err)
	}
	return j
}

func (j *jobShell) Write(p []byte) (int, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.Write(p)
}

// output is what the terminal showed so far.
func (j *jobShell) output() string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.out.String()
}

// press types keys at the terminal ("\x1a" is Ctrl-Z, "\x03" Ctrl-C).
func (j *jobShell) press(t *testing.T, keys string) {
	t.Helper()
	if _, err := j.pty.WriteString(keys); err != nil {
		t.Fatal(err)
	}
}

// fg continues the job, as the shell's fg does.
func (j *jobShell) fg(t *testing.T) {
	t.Helper()
	if _, err := j.ctl.WriteString("fg\n"); err != nil {
		t.Fatal(err)
	}
}

// event waits up to d for the job shell's next report that begins with
// prefix, skipping others, and returns it.
func (j *jobShell) event(t *testing.T, d time.Duration, prefix string) string {
	t.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		select {
		case e, ok := <-j.events:
			if !ok {
				t.Fatalf("job shell ended before %q; terminal:\n%s", prefix, j.output())
			}
			if strings.HasPrefix(e, prefix) {
				return e
			}
		case <-timer.C:
			t.Fatalf("no %q from the job shell within %v; terminal:\n%s", prefix, d, j.output())
		}
	}
}

// waitFor polls cond until it holds, failing the test if the job ends first
// or after 20s.
func (j *jobShell) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		select {
		case e := <-j.events:
			if strings.HasPrefix(e, "exited ") {
				t.Fatalf("the job %s before %s; terminal:\n%s", e, what, j.output())
			}
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; terminal:\n%s", what, j.output())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
