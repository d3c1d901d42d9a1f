package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// supervised is fencedlock's end of the supervisor process (supervisor.go).
type supervised struct {
	cmd    *exec.Cmd
	path   string // COMMAND's
	conn   *os.File
	events <-chan supEvent // closed when the supervisor is gone
	pid    int             // COMMAND's
	empty  bool            // the supervisor said the tree is gone (read once events is closed)
}

// supEvent is one message of the supervisor: "verb arg" or "verb a b".
type supEvent struct {
	verb string
	arg  string
	a, b int64
}

// startSupervisor starts the supervisor, which starts COMMAND (path, argv)
// with env; deadline is the end of the lock's validity on the boot clock.
func startSupervisor(path string, argv, env []string, foreground bool, deadline int64,
	stdout, stderr io.Writer, grace time.Duration) (*supervised, error) {
	exe, err := selfExe()
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	fds, err := socketPair()
	if err != nil {
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	_ = unix.SetNonblock(fds[0], true) // pollable: Close ends a pending Read
	ours, theirs := os.NewFile(uintptr(fds[0]), "supervisor"), os.NewFile(uintptr(fds[1]), "fencedlock")
	defer theirs.Close()
	args := []string{supervisorName, "-deadline", strconv.FormatInt(deadline, 10)}
	if foreground {
		args = append(args, "-foreground-group", strconv.Itoa(unix.Getpgrp()))
	}
	cmd := &exec.Cmd{
		Path:   exe,
		Args:   append(append(args, "--", path), argv...),
		Env:    env,
		Stdin:  os.Stdin,
		Stdout: stdout,
		Stderr: stderr,
		// The supervisor must outlive fencedlock (to kill the tree when it
		// dies), and must not get the terminal's signals: a group of its own.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
		ExtraFiles:  []*os.File{theirs},
		WaitDelay:   max(grace, time.Second), // output pipes held open by escaped processes
	}
	if err := cmd.Start(); err != nil {
		_ = ours.Close()
		return nil, fmt.Errorf("supervisor: %w", err)
	}
	s := &supervised{cmd: cmd, path: path, conn: ours}
	events := make(chan supEvent, 16)
	s.events = events
	go s.read(events)
	return s, nil
}

func (s *supervised) read(events chan<- supEvent) {
	defer close(events)
	sc := bufio.NewScanner(s.conn)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		e := supEvent{verb: f[0]}
		if len(f) > 1 {
			e.arg = f[1]
			e.a, _ = strconv.ParseInt(f[1], 10, 64)
		}
		if len(f) > 2 {
			e.b, _ = strconv.ParseInt(f[2], 10, 64)
		}
		if e.verb == "empty" {
			s.empty = true // before close(events): the reader of events sees it
		}
		events <- e
	}
}

// started waits for COMMAND to start; the error wraps the errno when it
// could not.
func (s *supervised) started() error {
	e, ok := <-s.events
	switch {
	case ok && e.verb == "started":
		s.pid = int(e.a)
		return nil
	case ok && e.verb == "failed":
		s.wait()
		return &os.PathError{Op: "start", Path: s.path, Err: syscall.Errno(e.a)}
	}
	s.wait()
	return errors.New("supervisor: ended before the command started")
}

// send writes one message to the supervisor. A supervisor that is gone
// shows as the end of events.
func (s *supervised) send(format string, args ...any) {
	_, _ = fmt.Fprintf(s.conn, format+"\n", args...)
}

// wait closes fencedlock's end, which tells the supervisor to kill whatever
// is left, and waits for it to exit.
func (s *supervised) wait() {
	_ = s.conn.Close()
	_ = s.cmd.Wait()
}
