package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/hook"
	"github.com/fencedlock/fencedlock/chaos/locker"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/clock"
)

// ClientMain runs this process as a client process of a chaos run, when Run
// started it as one (ClientProcEnv is set), and returns its exit status with
// isClient true; otherwise it returns at once with isClient false. A program
// that runs Run with Config.ClientProcs must call it first thing in main (or
// TestMain), and exit with the status when isClient: Run starts the client
// processes by running the program's own executable again.
//
// A client process reads its settings and commands on stdin, runs one
// workload client until stdin ends, and writes its operations on stdout as
// they are invoked and completed. It ignores SIGINT: Ctrl-C at a terminal
// reaches the whole process group, and Run ends the clients itself.
func ClientMain() (status int, isClient bool) {
	if os.Getenv(ClientProcEnv) == "" {
		return 0, false
	}
	signal.Ignore(os.Interrupt)
	if err := serveClient(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "chaos client process: %v\n", err)
		return 1, true
	}
	return 0, true
}

// serveClient is a client process: settings, then the loop.
func serveClient(in io.Reader, out io.Writer) error {
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("reading the settings: %w", err)
	}
	var s procSettings
	if err := json.Unmarshal(line, &s); err != nil {
		return fmt.Errorf("reading the settings: %w", err)
	}
	cfg, err := Config{Nodes: s.Nodes, TTL: s.TTL, NodeTimeout: s.NodeTimeout, Seed: s.Seed,
		Lock: s.Lock, Replicas: s.Replicas}.withDefaults()
	if err != nil {
		return err
	}

	w := &lineWriter{w: out}
	mem := recorder.NewMemory()
	rec := recorder.New(mem, recorder.WithNodes(s.Nodes))
	storeRDB := redis.NewClient(&redis.Options{Addr: s.Store})
	defer storeRDB.Close()
	var clk clock.Clock = clock.Real()
	if s.ClockRate != 0 {
		clk = clock.NewSkewed(clock.Real(), 0, s.ClockRate)
	}
	c, err := newClient(s.Client, cfg, s.Addrs, clk, rec.Client(clientName(s.Client)), newStore(storeRDB, true), new(atomic.Uint64))
	if err != nil {
		return err
	}
	defer c.close()
	// A new process has no connections yet: dial them before saying hello
	// (Run starts the workload once every client did), so that its first
	// holds do not pay for the dials under the node timeout. On a loaded
	// machine under -race the first 2s of a fresh client process got no
	// hold at all, every dial and first call past a 50ms node timeout.
	warmUp(append([]*redis.Client{storeRDB}, c.rdbs...), max(time.Second, 20*cfg.NodeTimeout))
	start, startErr := historyStart(rec)
	if err := w.send(procEvent{Hello: &procHello{PID: os.Getpid(), Start: start, StartError: startErr}}); err != nil {
		return err
	}
	mem.Watch(func(op history.Op) { _ = w.send(procEvent{Op: &op}) })

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	resume := make(chan struct{}, 1)
	started := make(chan struct{})
	var trigger *childTrigger
	if s.KillTrigger {
		trigger = newChildTrigger(c, w)
	}
	c.pause = func(ctx context.Context, l locker.Hold) {
		tok, _ := l.Token() // client processes run fencedlock alone, which has one
		if w.send(procEvent{Stop: &tok}) != nil {
			return
		}
		select { // stopped and continued meanwhile, or the run is over
		case <-resume:
		case <-ctx.Done():
		}
	}
	go func() { // commands, until stdin ends
		defer cancel()
		dec := json.NewDecoder(br)
		for {
			var cmd procCommand
			if dec.Decode(&cmd) != nil {
				return
			}
			switch cmd.Cmd {
			case cmdStart:
				select {
				case <-started:
				default:
					close(started)
				}
			case cmdPause:
				c.pauseNext.Store(true)
			case cmdSkew:
				c.skewNext.Store(true)
			case cmdLate:
				c.lateNext.Store(true)
			case cmdResume:
				select {
				case resume <- struct{}{}:
				default:
				}
			case cmdArm, cmdDisarm, cmdKilled:
				if trigger != nil {
					trigger.command(cmd)
				}
			}
		}
	}()
	select { // the other processes start meanwhile
	case <-started:
		c.loop(ctx)
	case <-ctx.Done():
	}
	if trigger != nil {
		trigger.stop()
	}
	return w.err
}

// childTrigger is kill-during-acquire inside a client process: a hook on
// each node connection that, when armed, stops an acquire script on its way
// to the node, asks Run to kill the node, and sends the script on once Run
// says it did (or the run ended).
type childTrigger struct {
	armed  []atomic.Bool
	killed chan struct{} // Run's cmdKilled
	done   chan struct{} // closed when the workload ended
}

func newChildTrigger(c *client, w *lineWriter) *childTrigger {
	t := &childTrigger{armed: make([]atomic.Bool, len(c.rdbs)),
		killed: make(chan struct{}, 1), done: make(chan struct{})}
	for i, rdb := range c.rdbs {
		rdb.AddHook(hook.NewTrigger(
			func(cmd redis.Cmder) bool { return t.armed[i].Load() && hook.IsScript(cmd) },
			func(ctx context.Context, _ redis.Cmder) {
				if !t.armed[i].CompareAndSwap(true, false) {
					return
				}
				node := i
				if w.send(procEvent{Fire: &node}) != nil {
					return
				}
				select {
				case <-t.killed:
				case <-t.done:
				case <-ctx.Done():
				}
			},
			hook.Times(1<<30)))
	}
	return t
}

func (t *childTrigger) command(cmd procCommand) {
	switch {
	case cmd.Node < 0 || cmd.Node >= len(t.armed):
	case cmd.Cmd == cmdArm:
		t.armed[cmd.Node].Store(true)
	case cmd.Cmd == cmdDisarm:
		t.armed[cmd.Node].Store(false)
	case cmd.Cmd == cmdKilled:
		select {
		case t.killed <- struct{}{}:
		default:
		}
	}
}

func (t *childTrigger) stop() { close(t.done) }
