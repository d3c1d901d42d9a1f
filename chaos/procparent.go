package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/chaos/report"
)

// procSet is the client processes of a run (Config.ClientProcs): each runs
// one workload client, started by running this program's executable again
// (see ClientMain), and reports its ops, which the set keeps on Run's
// history clock until merge puts them in the history.
//
// Clients: each process records its one client, the only one its recorder
// names, and the set puts each op under that client's index in Run's
// history.
//
// Times: each process stamps its ops on a recorder of its own, as
// offsets from when that recorder started, and says in its hello when that
// was on the machine's shared clock (sharedNow: CLOCK_MONOTONIC on Linux,
// which every process reads alike). The set adds the difference between that
// start and Run's recorder's start on the same clock, so every op lands on
// Run's history clock. The error is that of pairing a time.Now with a
// shared-clock reading on each side (historyStart): microseconds, measured,
// and written in the history as its clock error (merge).
type procSet struct {
	cfg      Config
	rec      *recorder.Recorder
	mem      *recorder.Memory // rec's sink
	b        backend.Backend
	start    int64           // rec's start on the shared clock
	startErr time.Duration   // how far start may be off
	runCtx   context.Context // the workload's, ends with the run: set before it starts
	procs    []*procClient
	trig     *procTrigger // kill-during-acquire through client 0, or nil
}

// procClient is one client process.
type procClient struct {
	set    *procSet
	id     int
	rec    *recorder.Client // the process's client in Run's history
	cmd    *exec.Cmd
	in     *lineWriter // its stdin
	stdin  io.Closer
	out    io.Reader
	stderr tailBuffer
	ready  chan struct{} // closed when the hello came
	ended  chan struct{} // closed when it exited and its ops are complete

	// Set by the reader goroutine before ready is closed.
	pid      int
	shift    time.Duration // from the process's history clock to Run's
	startErr time.Duration // how far the process's start may be off

	mu    sync.Mutex // protects the fields below
	ops   map[int]history.Op
	order []int // keys of ops, in the order first seen
	stats recorder.Stats
	exit  string
	stops []report.Stop
}

// procStartTimeout bounds how long a client process may take to say hello.
const procStartTimeout = 30 * time.Second

// startProcs starts cfg.Clients client processes on nodes addrs and the
// store at storeAddr, and waits for their hellos.
func startProcs(ctx context.Context, cfg Config, b backend.Backend, storeAddr string, rec *recorder.Recorder, mem *recorder.Memory) (*procSet, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("chaos: client processes: %w", err)
	}
	s := &procSet{cfg: cfg, rec: rec, mem: mem, b: b}
	s.start, s.startErr = historyStart(rec)
	addrs := backend.Addrs(b)
	for i := range cfg.Clients {
		st := procSettings{Client: i, Addrs: addrs, Store: storeAddr, Nodes: cfg.Nodes,
			TTL: cfg.TTL, NodeTimeout: cfg.NodeTimeout, Seed: cfg.Seed, Lock: cfg.Lock, Replicas: cfg.Replicas}
		if i == 0 && cfg.has(fault.ClientClockSkew) {
			st.ClockRate = 0.5 // half speed: validity lasts twice as long, as in-process
		}
		if i == 0 && cfg.has(fault.KillDuringAcquire) {
			st.KillTrigger = true
		}
		p, err := s.startProc(exe, st)
		if err != nil {
			s.kill()
			return nil, err
		}
		s.procs = append(s.procs, p)
	}
	timer := time.NewTimer(procStartTimeout)
	defer timer.Stop()
	for _, p := range s.procs {
		var err error
		select {
		case <-p.ready:
			continue
		case <-p.ended:
			err = fmt.Errorf("chaos: client process %d ended before it started (%s): %s", p.id, p.exitText(), p.stderr.String())
		case <-timer.C:
			err = fmt.Errorf("chaos: client process %d did not start within %v", p.id, procStartTimeout)
		case <-ctx.Done():
			err = ctx.Err()
		}
		s.kill()
		return nil, err
	}
	if cfg.has(fault.KillDuringAcquire) {
		s.trig = newProcTrigger(s.procs[0])
	}
	return s, nil
}

func (s *procSet) startProc(exe string, st procSettings) (*procClient, error) {
	p := &procClient{set: s, id: st.Client, rec: s.rec.Client(clientName(st.Client)), ops: map[int]history.Op{},
		ready: make(chan struct{}), ended: make(chan struct{})}
	p.cmd = exec.Command(exe)
	p.cmd.Env = append(os.Environ(), ClientProcEnv+"=1")
	p.cmd.SysProcAttr = procAttr()
	p.cmd.Stderr = &p.stderr
	stdin, err := p.cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("chaos: client process %d: %w", st.Client, err)
	}
	if p.out, err = p.cmd.StdoutPipe(); err != nil {
		return nil, fmt.Errorf("chaos: client process %d: %w", st.Client, err)
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("chaos: client process %d: %w", st.Client, err)
	}
	p.stdin, p.in = stdin, &lineWriter{w: stdin}
	_ = p.in.send(st) // a process that died says so through its stdout
	go p.read()
	return p, nil
}

// send sends cmd to p; a process that ended does not need it.
func (p *procClient) send(cmd procCommand) { _ = p.in.send(cmd) }

// begin starts the workload in every process: they wait for it, so that
// none runs before the run's clock does.
func (s *procSet) begin() {
	for _, p := range s.procs {
		p.send(procCommand{Cmd: cmdStart})
	}
}

// arm arms a client fault of kind on client i (clientFaults).
func (s *procSet) arm(kind fault.Kind, i int) {
	switch kind {
	case fault.ClientPause:
		s.procs[i].send(procCommand{Cmd: cmdPause})
	case fault.ClientClockSkew:
		s.procs[i].send(procCommand{Cmd: cmdSkew})
	case fault.LateWrite:
		s.procs[i].send(procCommand{Cmd: cmdLate})
	}
}

// wait ends the processes when the run ends: it closes their stdin, so
// that each finishes the hold it is in and exits, and kills those that have
// not within the bound of a hold (acquire, write, release: the TTL and the
// store's second, twice over).
func (s *procSet) wait() {
	<-s.runCtx.Done()
	for _, p := range s.procs {
		p.in.mu.Lock()
		_ = p.stdin.Close()
		p.in.err = os.ErrClosed
		p.in.mu.Unlock()
	}
	timer := time.NewTimer(2 * (s.cfg.TTL + time.Second))
	defer timer.Stop()
	for _, p := range s.procs {
		select {
		case <-p.ended:
		case <-timer.C:
			s.kill()
			<-p.ended
		}
	}
}

// kill kills every process that has not ended and waits until they did.
func (s *procSet) kill() {
	for _, p := range s.procs {
		select {
		case <-p.ended:
		default:
			_ = p.cmd.Process.Kill()
		}
	}
	for _, p := range s.procs {
		<-p.ended
	}
}

// stats sums the processes' running counts.
func (s *procSet) stats() recorder.Stats {
	st := s.mem.Stats()
	for _, p := range s.procs {
		p.mu.Lock()
		st.Acquisitions += p.stats.Acquisitions
		st.AcquireFailures += p.stats.AcquireFailures
		st.Faults += p.stats.Faults
		st.Writes += p.stats.Writes
		st.StaleRejected += p.stats.StaleRejected
		p.mu.Unlock()
	}
	return st
}

// report describes the processes for the report; call it once they ended.
func (s *procSet) report() []report.ClientProc {
	var out []report.ClientProc
	for _, p := range s.procs {
		p.mu.Lock()
		out = append(out, report.ClientProc{Client: p.id, PID: p.pid, Exit: p.exit, Stops: p.stops})
		p.mu.Unlock()
	}
	return out
}

// read reads the events of p until it exits, then completes the ops it
// left in flight.
func (p *procClient) read() {
	defer close(p.ended)
	br := bufio.NewReader(p.out)
	var bad error
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && bad == nil {
			if bad = p.handle(line); bad != nil {
				_ = p.cmd.Process.Kill() // a bug: its history cannot be trusted
			}
		}
		if err != nil {
			break
		}
	}
	died := p.set.rec.Offset(time.Now())
	werr := p.cmd.Wait()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exit = exitText(werr, bad)
	why := fmt.Sprintf("client process %d ended (%s) with this operation in flight", p.pid, p.exit)
	for _, id := range p.order {
		op := p.ops[id]
		if op.Outcome != history.Pending {
			continue
		}
		op.Outcome, op.Complete, op.Err = history.Failed, died, why
		if op.Kind == history.KindLost { // seen, or not: a signal has no outcome to doubt
			op.Outcome, op.Complete, op.Err = history.OK, op.Invoke, ""
		}
		p.ops[id] = op
	}
}

func exitText(werr, bad error) string {
	s := "exit status 0"
	if werr != nil {
		s = werr.Error()
	}
	if bad != nil {
		s += "; killed after a bad line: " + bad.Error()
	}
	return s
}

func (p *procClient) exitText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit
}

// handle acts on one event of p.
func (p *procClient) handle(line []byte) error {
	var ev procEvent
	if err := json.Unmarshal(line, &ev); err != nil {
		return err
	}
	switch {
	case ev.Hello != nil:
		select {
		case <-p.ready:
			return errors.New("a second hello")
		default:
		}
		p.pid, p.shift, p.startErr = ev.Hello.PID, time.Duration(ev.Hello.Start-p.set.start), ev.Hello.StartError
		close(p.ready)
	case ev.Op != nil:
		p.record(*ev.Op)
	case ev.Stop != nil:
		p.stopPastValidity(*ev.Stop)
	case ev.Fire != nil && p.set.trig != nil && p.set.trig.p == p:
		p.set.trig.fire(*ev.Fire)
	default:
		return fmt.Errorf("unexpected event %s", line)
	}
	return nil
}

// record keeps op, moved onto Run's history clock and p's client.
func (p *procClient) record(op history.Op) {
	op.Client = p.id
	op.Invoke += p.shift
	if op.Outcome != history.Pending {
		op.Complete += p.shift
	}
	if op.ValidUntil != 0 {
		op.ValidUntil += p.shift
	}
	p.mu.Lock()
	if _, seen := p.ops[op.ID]; !seen {
		p.order = append(p.order, op.ID)
	}
	p.ops[op.ID] = op
	p.count(op)
	p.mu.Unlock()
	if f := p.set.cfg.onProcOp; f != nil {
		f(p.id, p.pid, op)
	}
}

// count adds a completed op to p's running counts; p.mu is held.
func (p *procClient) count(op history.Op) {
	switch {
	case op.Kind == history.KindAcquire && op.Outcome == history.OK:
		p.stats.Acquisitions++
	case op.Kind == history.KindAcquire && op.Outcome == history.Failed:
		p.stats.AcquireFailures++
	case op.Kind == history.KindWrite && op.Outcome == history.OK:
		p.stats.Writes++
	case op.Kind == history.KindWrite && op.Outcome == history.Rejected:
		p.stats.StaleRejected++
	case op.Kind == history.KindFault:
		p.stats.Faults++
	}
}

// tailBuffer keeps the last 4 KiB written to it: a process's stderr.
type tailBuffer struct {
	mu sync.Mutex // protects b
	b  []byte
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, b...)
	if n := len(t.b) - 4096; n > 0 {
		t.b = t.b[n:]
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
