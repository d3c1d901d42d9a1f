// Package redisproc starts and controls local redis-server processes on
// loopback ports: the real nodes behind the tests, the examples, the chaos
// harness and the benchmarks. A Proc can be killed, restarted with or without
// its data, paused and resumed, which is what the fault injection needs.
//
// A Proc is safe for concurrent use.
package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Config says how to start a node. A zero Config is valid: redis-server from
// PATH, a free loopback port, persistence off.
type Config struct {
	// Binary is the redis-server executable. Default: "redis-server" from PATH.
	Binary string
	// Port to listen on. Default 0: a free ephemeral port picked at start.
	Port int
	// Dir holds the node's data and log. Default: a new temporary directory,
	// removed by Close.
	Dir string
	// AOF turns on the append-only file with appendfsync always, so that a
	// restart with data loses nothing that was acknowledged.
	AOF bool
	// Env is added to the process environment (e.g. LD_PRELOAD for libfaketime).
	Env []string
	// Args are extra redis-server arguments, e.g. "--maxmemory", "10mb".
	Args []string
	// ConfigFile, if set, is given to redis-server as its config file (its
	// first argument, where redis-server looks for one). Sentinel needs one
	// and rewrites it. Default: none.
	ConfigFile string
	// StartTimeout bounds the wait for the node to answer PING. Default 10s.
	StartTimeout time.Duration
}

// Proc is one redis-server process.
type Proc struct {
	cfg     Config
	ownsDir bool

	mu     sync.Mutex // protects env, cmd, exited, paused, closed
	env    []string   // Config.Env, or what SetEnv put in its place
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
	paused bool
	closed bool
}

// ErrNotRunning is returned by operations that need a live process.
var ErrNotRunning = errors.New("redisproc: node is not running")

// Start launches redis-server and waits until it answers PING.
func Start(ctx context.Context, cfg Config) (*Proc, error) {
	if cfg.Binary == "" {
		cfg.Binary = "redis-server"
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("redisproc: %s not found (install Debian's redis-server package): %w", cfg.Binary, err)
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	p := &Proc{cfg: cfg, env: cfg.Env}
	if p.cfg.Dir == "" {
		dir, err := os.MkdirTemp("", "redisproc-")
		if err != nil {
			return nil, fmt.Errorf("redisproc: %w", err)
		}
		p.cfg.Dir, p.ownsDir = dir, true
	}
	// A free port can be taken by someone else between our probe and the
	// server's bind: retry a few times with a fresh port.
	pickPort := p.cfg.Port == 0
	var err error
	for range 5 {
		if pickPort {
			if p.cfg.Port, err = FreePort(); err != nil {
				break
			}
		}
		if err = p.start(ctx); err == nil {
			return p, nil
		}
		if !pickPort || ctx.Err() != nil {
			break
		}
	}
	p.cleanupDir()
	return nil, err
}

// FreePort returns a loopback TCP port that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("redisproc: free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Addr is the node's host:port.
func (p *Proc) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p.cfg.Port)) }

// Port is the node's TCP port.
func (p *Proc) Port() int { return p.cfg.Port }

// Dir is the node's data directory.
func (p *Proc) Dir() string { return p.cfg.Dir }

// PID of the running process, or 0.
func (p *Proc) PID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// Running reports whether the process is alive (paused counts as alive).
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

func (p *Proc) runningLocked() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *Proc) args() []string {
	var a []string
	if p.cfg.ConfigFile != "" {
		a = append(a, p.cfg.ConfigFile)
	}
	a = append(a,
		"--port", strconv.Itoa(p.cfg.Port),
		"--bind", "127.0.0.1",
		"--protected-mode", "no",
		"--dir", p.cfg.Dir,
		"--save", "",
		"--daemonize", "no",
		"--logfile", filepath.Join(p.cfg.Dir, "redis.log"),
	)
	if p.cfg.AOF {
		a = append(a, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		a = append(a, "--appendonly", "no")
	}
	return append(a, p.cfg.Args...)
}

func (p *Proc) start(ctx context.Context) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errors.New("redisproc: closed")
	}
	if p.runningLocked() {
		p.mu.Unlock()
		return fmt.Errorf("redisproc: %s already running", p.Addr())
	}
	// Not CommandContext: the process must outlive the ctx that started it.
	cmd := exec.Command(p.cfg.Binary, p.args()...)
	cmd.Env = append(os.Environ(), p.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.mu.Unlock()
		return fmt.Errorf("redisproc: start %s: %w", p.Addr(), err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	p.cmd, p.exited, p.paused = cmd, exited, false
	p.mu.Unlock()

	if err := p.waitReady(ctx, exited); err != nil {
		_ = p.Kill()
		return err
	}
	// The port may have been taken by another server between our probe and
	// the bind, and then the PING was that one's answer: make sure the
	// server on the port is ours.
	// A server that does not answer INFO in time (a loaded machine) has
	// answered the PING already: only a definite other pid is a clash.
	if pid, err := ServerPID(ctx, p.Addr(), p.cfg.StartTimeout); err == nil && pid != cmd.Process.Pid {
		_ = p.Kill()
		return fmt.Errorf("redisproc: %s answers, but as process %d, not %d: port taken",
			p.Addr(), pid, cmd.Process.Pid)
	}
	return nil
}

// ServerPID asks the server on addr for its process id (INFO server).
func ServerPID(ctx context.Context, addr string, timeout time.Duration) (int, error) {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")); err != nil {
		return 0, err
	}
	rd := bufio.NewReader(conn)
	head, err := rd.ReadString('\n')
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	if err != nil || !strings.HasPrefix(head, "$") {
		return 0, fmt.Errorf("INFO server: reply %q", head)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rd, body); err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("INFO server: no process_id")
}

func (p *Proc) waitReady(ctx context.Context, exited <-chan struct{}) error {
	err := WaitPing(ctx, p.Addr(), p.cfg.StartTimeout, exited)
	switch {
	case errors.Is(err, errStopped):
		return fmt.Errorf("redisproc: redis-server on %s exited at start: %s", p.Addr(), p.logTail())
	case err != nil:
		return fmt.Errorf("redisproc: redis-server on %s not ready: %w", p.Addr(), err)
	}
	return nil
}

var errStopped = errors.New("redisproc: stopped waiting")

// WaitPing polls PING at addr until it answers, and fails when timeout
// passes, ctx ends or stop (if not nil) is closed.
func WaitPing(ctx context.Context, addr string, timeout time.Duration, stop <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		err := Ping(ctx, addr, 200*time.Millisecond)
		if err == nil {
			return nil
		}
		select {
		case <-stop:
			return errStopped
		case <-ctx.Done():
			return fmt.Errorf("PING %s: %w (last error: %v)", addr, ctx.Err(), err)
		case <-tick.C:
		}
	}
}

func (p *Proc) logTail() string {
	b, err := os.ReadFile(filepath.Join(p.cfg.Dir, "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 3 {
		lines = lines[len(lines)-3:]
	}
	return strings.Join(lines, " | ")
}

// Ping dials addr, sends PING in the inline protocol and expects +PONG.
// It needs no client library, so it also works as a readiness probe.
func Ping(ctx context.Context, addr string, timeout time.Duration) error {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := conn.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("redisproc: PING %s: %q", addr, strings.TrimSpace(line))
	}
	return nil
}

// Kill sends SIGKILL and waits until the process is gone. A paused process is
// killed too. Killing a stopped node is a no-op.
func (p *Proc) Kill() error {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
	p.mu.Lock()
	p.paused = false
	p.mu.Unlock()
	return nil
}

// Restart kills the node if it runs and starts it again on the same port.
// withData keeps the data directory (the AOF, if Config.AOF); without it the
// node comes back empty, as after a disk loss.
func (p *Proc) Restart(ctx context.Context, withData bool) error {
	if err := p.Kill(); err != nil {
		return err
	}
	if !withData {
		if err := p.WipeData(); err != nil {
			return err
		}
	}
	return p.start(ctx)
}

// Stop kills the node without restarting it (same as Kill).
func (p *Proc) Stop() error { return p.Kill() }

// WipeData removes the node's persisted data. The node must be stopped.
func (p *Proc) WipeData() error {
	if p.Running() {
		return fmt.Errorf("redisproc: %s: wipe data of a running node", p.Addr())
	}
	entries, err := os.ReadDir(p.cfg.Dir)
	if err != nil {
		return fmt.Errorf("redisproc: %w", err)
	}
	for _, e := range entries {
		if e.Name() == "redis.log" {
			continue
		}
		if err := os.RemoveAll(filepath.Join(p.cfg.Dir, e.Name())); err != nil {
			return fmt.Errorf("redisproc: %w", err)
		}
	}
	return nil
}

// SetEnv replaces Config.Env for the next start (StartStopped or Restart);
// a running process keeps the environment it was started with. It is how a
// node is restarted under libfaketime with a different clock.
func (p *Proc) SetEnv(env []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.env = append([]string(nil), env...)
}

// StartStopped starts a node that was killed, keeping its data.
func (p *Proc) StartStopped(ctx context.Context) error { return p.start(ctx) }

// Pause stops the process with SIGSTOP: connections stay open, nothing is
// answered, like a node in a long GC or a VM freeze. A signal is delivered
// asynchronously: Pause returns once the kernel reports the process stopped
// (on Linux; elsewhere at once), so that nothing sent afterwards is answered.
func (p *Proc) Pause() error {
	if err := p.signal(syscall.SIGSTOP, true); err != nil {
		return err
	}
	p.mu.Lock()
	pid := p.cmd.Process.Pid
	p.mu.Unlock()
	stat := fmt.Sprintf("/proc/%d/stat", pid)
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(stat)
		if err != nil {
			return nil // no procfs: nothing to wait on
		}
		// pid (comm) state ...: comm may hold spaces, the state follows the last ')'.
		if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return nil
		}
		time.Sleep(100 * time.Microsecond) // polling a kernel state
	}
	return fmt.Errorf("redisproc: %s did not stop after SIGSTOP", p.Addr())
}

// Resume continues a paused process with SIGCONT.
func (p *Proc) Resume() error { return p.signal(syscall.SIGCONT, false) }

// Paused reports whether the node is paused.
func (p *Proc) Paused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.paused && p.runningLocked()
}

func (p *Proc) signal(sig syscall.Signal, paused bool) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.runningLocked() {
		return ErrNotRunning
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("redisproc: signal %s: %w", p.Addr(), err)
	}
	p.paused = paused
	return nil
}

// Close kills the process and removes the data directory if Start created it.
func (p *Proc) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.Kill()
	p.cleanupDir()
	return err
}

func (p *Proc) cleanupDir() {
	if p.ownsDir {
		_ = os.RemoveAll(p.cfg.Dir)
	}
}

// StartN starts n nodes with the same config (each with its own port and dir).
// On error the nodes already started are closed.
func StartN(ctx context.Context, n int, cfg Config) ([]*Proc, error) {
	procs := make([]*Proc, 0, n)
	for range n {
		c := cfg
		c.Dir, c.Port = "", 0
		p, err := Start(ctx, c)
		if err != nil {
			for _, q := range procs {
				_ = q.Close()
			}
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}
