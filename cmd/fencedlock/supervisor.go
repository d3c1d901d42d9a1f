package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The supervisor is the process between fencedlock and COMMAND. fencedlock
// starts it (its own binary, with argv[0] supervisorName) in a process group
// of its own; it becomes a child subreaper, starts COMMAND and reaps every
// process of COMMAND's tree. It carries out what fencedlock asks over a socket
// (fd 3), one line per message, and on its own it kills the whole tree with
// SIGKILL when the socket closes (fencedlock died, even by SIGKILL) or at
// the deadline fencedlock last sent it, a fifth of the TTL before the lock's
// validity ends (fencedlock frozen or stopped). It exits once the tree is empty. fencedlock holds it
// to each answer below in time: a supervisor that does not answer is
// killed, and fencedlock kills the tree itself (enforce.go).
//
// fencedlock → supervisor:
//
//	deadline NS   kill the tree at NS on the boot clock (bootNow) unless a later deadline comes
//	signal N      send signal N to COMMAND (its process group unless --foreground)
//	stop NS       SIGTERM and SIGCONT to the tree, SIGKILL NS later (or at the deadline)
//	kill          SIGKILL the tree now
//	suspend       SIGSTOP the tree; answers "suspended" once all of it is stopped
//	resume        SIGCONT the tree
//
// supervisor → fencedlock:
//
//	started PID        COMMAND runs
//	failed ERRNO       COMMAND could not be started; the supervisor exits
//	stopped PID SIG    a process of the tree stopped on a signal the supervisor did not send
//	exited STATUS      COMMAND ended (a wait status)
//	leftovers N        N processes of the tree still ran when COMMAND ended
//	suspended          the tree is stopped
//	signalled N        signal N was passed on (or COMMAND had ended)
//	killed WHY         SIGKILL sent to the tree: "grace" (after stop), "deadline" or "asked" (kill)
//	empty              the tree is gone; the supervisor exits
const supervisorName = "fencedlock-supervisor"

// isSupervisor says whether this process was started as the supervisor.
func isSupervisor() bool { return len(os.Args) > 0 && os.Args[0] == supervisorName }

// supervisor is the state of the supervisor process; one goroutine owns it.
type supervisor struct {
	fgPgid    int  // fencedlock's process group with --foreground, else 0
	cmd       int  // COMMAND's pid
	cmdEnded  bool // COMMAND was reaped
	deadline  time.Duration
	ourStops  map[int]bool  // processes this supervisor stopped: their stop is no news
	suspended time.Time     // when the tree was asked to stop; zero when it runs
	confirmed bool          // "suspended" was sent
	killing   bool          // SIGKILL the tree until it is empty
	graceEnd  time.Duration // after a stop: when SIGKILL follows SIGTERM, on the boot clock
}

// supervisorMain runs the supervisor and returns its exit status.
func supervisorMain() int {
	// Pdeathsig fires when the thread that started COMMAND ends: keep it.
	runtime.LockOSThread()
	fs := flag.NewFlagSet(supervisorName, flag.ContinueOnError)
	deadline := fs.Int64("deadline", 0, "")
	fgPgid := fs.Int("foreground-group", 0, "")
	if err := fs.Parse(os.Args[1:]); err != nil || fs.NArg() < 2 {
		return 2
	}
	s := &supervisor{fgPgid: *fgPgid, deadline: time.Duration(*deadline),
		ourStops: make(map[int]bool)}
	syscall.CloseOnExec(3)
	catchSignals()
	if err := becomeSubreaper(); err != nil && seesTree {
		s.send("failed %d", int(errnoOf(err)))
		return 1
	}
	pid, err := syscall.ForkExec(fs.Arg(0), fs.Args()[1:], &syscall.ProcAttr{
		Env: os.Environ(), Files: []uintptr{0, 1, 2}, Sys: commandAttr(s.fgPgid),
	})
	if err != nil {
		s.send("failed %d", int(errnoOf(err)))
		return 0
	}
	s.cmd = pid
	s.send("started %d", pid)
	return s.loop()
}

// catchSignals keeps the signals a terminal or fencedlock's group gets from
// ending or stopping the supervisor: fencedlock decides what COMMAND gets.
// Caught rather than ignored, so that COMMAND starts with them at default; a
// signal ignored when the supervisor started stays ignored for COMMAND.
func catchSignals() {
	sigs := make(chan os.Signal, 8)
	for _, s := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU} {
		if !signal.Ignored(s) {
			signal.Notify(sigs, s)
		}
	}
	go func() {
		for range sigs {
		}
	}()
}

type reaped struct {
	pid   int
	ws    unix.WaitStatus
	empty bool // no child is left
}

// reap waits for every child, COMMAND's and the adopted orphans, and reports
// exits and stops, each followed by a byte on wake; once no child is left,
// the tree is empty.
func reap(out chan<- reaped, wake int) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WUNTRACED|unix.WCONTINUED, nil)
		if err == unix.EINTR {
			continue
		}
		if err != nil { // ECHILD
			out <- reaped{empty: true}
			_, _ = syscall.Write(wake, []byte{0})
			return
		}
		out <- reaped{pid: pid, ws: ws}
		_, _ = syscall.Write(wake, []byte{0}) // full: the loop has a wake-up pending anyway
	}
}

// every is how often the tree is scanned again while it is being killed or
// stopped: processes forked meanwhile get the signal too.
const every = 10 * time.Millisecond

// loop runs until the tree is empty. It is one thread of events: all that
// fencedlock sent so far is read before a deadline is judged, so a deadline
// that fencedlock moved in time is never acted on.
func (s *supervisor) loop() int {
	var wake [2]int
	if err := syscall.Pipe(wake[:]); err != nil {
		s.kill()
		return 1
	}
	for _, fd := range wake {
		syscall.CloseOnExec(fd)
		_ = syscall.SetNonblock(fd, true)
	}
	reaps := make(chan reaped, 64)
	go reap(reaps, wake[1])
	var (
		in   []byte // from fencedlock: an incomplete line
		open = true // fencedlock's end of the socket is open
	)
	for {
		fds := []unix.PollFd{{Fd: int32(wake[0]), Events: unix.POLLIN}}
		if open {
			fds = append(fds, unix.PollFd{Fd: 3, Events: unix.POLLIN})
		}
		if _, err := unix.Poll(fds, s.timeout()); err != nil && err != unix.EINTR {
			s.kill()
		}
		if open && !s.receive(&in) { // fencedlock is gone: so is the lock's extension
			open = false
			s.kill()
		}
		for drained := false; !drained; {
			_, err := syscall.Read(wake[0], make([]byte, 64))
			drained = err != nil
		}
		for pending := true; pending; {
			select {
			case r := <-reaps:
				if r.empty {
					s.send("empty")
					return 0
				}
				s.reaped(r)
			default:
				pending = false
			}
		}
		now := bootNow()
		switch {
		case s.killing:
		case now >= s.deadline:
			s.send("killed deadline")
			s.kill()
		case s.graceEnd != 0 && now >= s.graceEnd:
			s.send("killed grace")
			s.kill()
		}
		switch {
		case s.killing:
			s.signalTree(syscall.SIGKILL)
		case !s.suspended.IsZero() && !s.confirmed:
			s.stopTree()
		}
	}
}

// timeout is how long the loop may sleep, in milliseconds (-1: until an
// event).
func (s *supervisor) timeout() int {
	if s.killing || (!s.suspended.IsZero() && !s.confirmed) {
		return int(every.Milliseconds())
	}
	next := s.deadline
	if s.graceEnd != 0 {
		next = min(next, s.graceEnd)
	}
	left := next - bootNow()
	if left <= 0 {
		return 0
	}
	return int((left + time.Millisecond - 1) / time.Millisecond)
}

// receive reads and carries out what fencedlock sent, without blocking. It
// returns false once fencedlock's end is closed.
func (s *supervisor) receive(in *[]byte) bool {
	open := true
	buf := make([]byte, 4096)
	for {
		n, _, err := unix.Recvfrom(3, buf, unix.MSG_DONTWAIT)
		if err == unix.EINTR {
			continue
		}
		if n > 0 {
			*in = append(*in, buf[:n]...)
			continue
		}
		open = err == unix.EAGAIN || err == unix.EWOULDBLOCK // else EOF (n == 0) or a broken socket
		break
	}
	for {
		line, rest, ok := bytes.Cut(*in, []byte("\n"))
		if !ok {
			break
		}
		*in = rest
		s.handle(string(line))
	}
	return open
}

// handle carries out one message.
func (s *supervisor) handle(m string) {
	verb, arg, _ := strings.Cut(m, " ")
	n, _ := strconv.ParseInt(arg, 10, 64)
	switch verb {
	case "deadline":
		s.deadline = time.Duration(n)
	case "signal":
		if !s.cmdEnded { // else the pid may be another process's by now
			s.signalCommand(syscall.Signal(n))
		}
		s.send("signalled %d", n)
	case "stop":
		s.signalTree(syscall.SIGTERM)
		s.signalTree(syscall.SIGCONT) // a stopped process acts on SIGTERM only once continued
		s.suspended, s.confirmed = time.Time{}, false
		if s.graceEnd == 0 {
			s.graceEnd = bootNow() + max(time.Duration(n), time.Nanosecond)
		}
	case "kill":
		s.send("killed asked")
		s.kill()
	case "suspend":
		s.suspended, s.confirmed = time.Now(), false
		s.stopTree()
	case "resume":
		s.suspended, s.confirmed = time.Time{}, false
		s.signalTree(syscall.SIGCONT)
	}
}

// reaped handles a child's change of state.
func (s *supervisor) reaped(r reaped) {
	switch {
	case r.pid == s.cmd && (r.ws.Exited() || r.ws.Signaled()):
		s.cmdEnded = true
		s.send("exited %d", int(r.ws))
		s.send("leftovers %d", len(descendants(os.Getpid())))
	case r.ws.Stopped():
		sig := r.ws.StopSignal()
		switch {
		case sig == unix.SIGSTOP && s.ourStops[r.pid]:
			delete(s.ourStops, r.pid)
		case sig == unix.SIGTSTP && s.fgPgid != 0:
			// With --foreground, the terminal's Ctrl-Z: fencedlock got it too.
		case !s.suspended.IsZero() || s.killing:
		default:
			s.send("stopped %d %d", r.pid, int(sig))
		}
	}
}

// send writes one message to fencedlock (fd 3); if it is gone, the
// socket's end tells the loop.
func (s *supervisor) send(format string, args ...any) {
	_, _ = syscall.Write(3, fmt.Appendf(nil, format+"\n", args...))
}

func errnoOf(err error) syscall.Errno {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return syscall.EINVAL
}
