package chaos_test

import (
	"cmp"
	"errors"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/internal/faketime"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
	"github.com/fencedlock/fencedlock/chaos/report"
)

// procsConfig is a short run of client processes on backendName, timed as
// the short runs are (see timing): three processes, so that the machine's
// two cores are not swamped by race-detector binaries.
func procsConfig(t *testing.T, backendName string, faults ...fault.Kind) chaos.Config {
	t.Helper()
	ttl, nodeTimeout := shortTiming(t, backendName)
	return chaos.Config{
		Nodes: 5, Clients: 3, Duration: 10 * ttl, Faults: faults, Seed: 7,
		TTL: ttl, NodeTimeout: nodeTimeout, Backend: backendName, ClientProcs: true,
	}
}

// runProcs runs cfg and checks what every run of client processes must
// show: one process per client, each its own pid, and a bounded end.
func runProcs(t *testing.T, cfg chaos.Config) report.Run {
	t.Helper()
	run, err := chaos.Run(t.Context(), cfg)
	if cfg.Backend == "docker" && errors.Is(err, docker.ErrNoImage) {
		testenv.SkipOrFail(t, "docker works, but: %v\nbuild the image with scripts/redis-image.sh (make image)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keep(t, run) })
	checkRoundTrip(t, run.History, run.Result, cfg.CheckOptions())
	res := run.Result
	t.Logf("%s, %d client processes (ttl %v, node timeout %v): %d acquisitions, %d failed, found %+v, stale rejected %d; procs %+v",
		cfg.Backend, cfg.Clients, cfg.TTL, cfg.NodeTimeout, res.Acquisitions, res.AcquireFailures, res.Found,
		res.StaleWritesRejected, run.ClientProcs)
	if len(run.ClientProcs) != cfg.Clients {
		t.Fatalf("%d client processes reported, want %d", len(run.ClientProcs), cfg.Clients)
	}
	pids := map[int]bool{os.Getpid(): true}
	for _, p := range run.ClientProcs {
		if pids[p.PID] || p.PID <= 0 {
			t.Fatalf("client %d: pid %d is not a process of its own", p.Client, p.PID)
		}
		pids[p.PID] = true
	}
	// Each process finishes its hold when the run ends, or is killed within
	// twice the bound of one (procSet.wait).
	if limit := cfg.Duration + 3*(cfg.TTL+time.Second); run.Duration > limit {
		t.Errorf("the workload took %v, more than %v", run.Duration, limit)
	}
	if res.Pending != 0 {
		t.Errorf("%d ops never completed", res.Pending)
	}
	if !res.StoreChecked || !res.StoreCorrect {
		t.Fatalf("store not correct: %+v", res.Found)
	}
	checkHandoffs(t, run.History)
	return run
}

// checkHandoffs checks that the processes' clocks were aligned: when hold A
// was released while it still held a quorum (release ok), the next hold B
// by token, of another client, cannot have been acquired before A's release
// was invoked. An offset between two processes' stamps larger than that
// handoff shows up here.
func checkHandoffs(t *testing.T, h history.History) {
	t.Helper()
	var acquires []history.Op
	released := map[int]history.Op{} // by hold
	for _, op := range h.Ops {
		switch {
		case op.Kind == history.KindAcquire && op.Outcome == history.OK:
			acquires = append(acquires, op)
		case op.Kind == history.KindRelease && op.Outcome == history.OK:
			released[op.Hold] = op
		}
	}
	slices.SortFunc(acquires, func(a, b history.Op) int { return cmp.Compare(a.Token, b.Token) })
	n := 0
	closest := time.Duration(1<<63 - 1)
	for i := 1; i < len(acquires); i++ {
		a, b := acquires[i-1], acquires[i]
		r, ok := released[a.ID]
		if !ok || a.Client == b.Client {
			continue
		}
		n++
		closest = min(closest, b.Complete-r.Invoke)
		if b.Complete <= r.Invoke {
			t.Errorf("client %d acquired token %d at %v, before client %d released token %d at %v: the processes' clocks disagree",
				b.Client, b.Token, b.Complete, a.Client, a.Token, r.Invoke)
		}
	}
	t.Logf("%d handoffs between processes; the closest came %v after the release was invoked", n, closest)
	if n == 0 {
		t.Errorf("no handoff between processes to check the clocks by")
	}
}

// checkStops checks the client-pause stops of a run of client processes:
// each is a SIGSTOP the kernel showed (or the fault would have failed),
// between the hold's acquire and its write, held past the hold's validity
// unless the run ended first; and the write after it is rejected exactly
// when a later token was written meanwhile. It returns the stops held past
// their validity, and how many of their writes were rejected.
func checkStops(t *testing.T, run report.Run) (past, rejected int) {
	t.Helper()
	h := run.History
	if len(run.Result.FailedFaults) > 0 {
		t.Fatalf("faults failed: %+v", run.Result.FailedFaults)
	}
	pauses := 0
	for _, op := range h.Ops {
		if op.Kind == history.KindFault && op.Fault == fault.ClientPause {
			pauses++
		}
	}
	var stops int
	for _, p := range run.ClientProcs {
		stops += len(p.Stops)
		for _, s := range p.Stops {
			end := ms(s.AtMs + s.ForMs)
			var acq, write *history.Op
			for i, op := range h.Ops {
				if op.Client != p.Client || op.Token != s.Token {
					continue
				}
				switch op.Kind {
				case history.KindAcquire:
					acq = &h.Ops[i]
				case history.KindWrite:
					write = &h.Ops[i]
				}
			}
			if acq == nil || write == nil {
				t.Fatalf("client %d (pid %d): no acquire and write of token %d", p.Client, p.PID, s.Token)
			}
			if acq.Complete.Truncate(time.Microsecond) > ms(s.AtMs) || write.Invoke < end {
				t.Errorf("client %d: stop %v..%v is not between its acquire (done %v) and its write (%v)",
					p.Client, ms(s.AtMs), end, acq.Complete, write.Invoke)
			}
			if ms(s.ValidUntilMs) != acq.ValidUntil.Truncate(time.Microsecond) {
				t.Errorf("client %d: stop says valid until %v, the acquire %v", p.Client, ms(s.ValidUntilMs), acq.ValidUntil)
			}
			if end < acq.ValidUntil {
				t.Logf("client %d: stop ended at %v, before the validity end %v (the run ended)", p.Client, end, acq.ValidUntil)
				continue
			}
			past++
			// Fencing: a later token written before this write was invoked
			// makes it stale.
			later := false
			for _, op := range h.Ops {
				if op.Kind == history.KindWrite && op.Outcome == history.OK && op.Token > s.Token && op.Complete < write.Invoke {
					later = true
				}
			}
			switch {
			case later && write.Outcome != history.Rejected:
				t.Errorf("client %d: its write after the stop (token %d) was %s, though a later token was written meanwhile", p.Client, s.Token, write.Outcome)
			case write.Outcome == history.Rejected:
				rejected++
			}
		}
	}
	if stops != pauses {
		t.Errorf("%d stops listed, %d client-pause faults in the history", stops, pauses)
	}
	return past, rejected
}

func ms(f float64) time.Duration {
	return time.Duration(f * float64(time.Millisecond)).Round(time.Microsecond)
}

// TestClientProcsPause runs client processes with client-pause on the
// process backend: each pause is a real SIGSTOP of a holder between its
// acquire and its write, past its validity; a later holder's write makes
// the paused one's stale, and the store rejects it.
func TestClientProcsPause(t *testing.T) {
	cfg := procsConfig(t, "process", fault.ClientPause)
	run := runProcs(t, cfg)
	for _, p := range run.ClientProcs {
		if p.Exit != "exit status 0" {
			t.Errorf("client %d (pid %d) ended with %q", p.Client, p.PID, p.Exit)
		}
	}
	past, rejected := checkStops(t, run)
	t.Logf("%d stops past their validity, %d stale writes after them rejected", past, rejected)
	if past == 0 {
		t.Fatalf("no stop held past its validity in %v", cfg.Duration)
	}
	if rejected == 0 {
		t.Errorf("no paused holder's write was rejected: no other client wrote during %d stops", past)
	}
}

// TestClientProcsDocker runs client processes against containers: the
// processes run on the host and reach the nodes' published ports.
func TestClientProcsDocker(t *testing.T) {
	testenv.RequireDocker(t)
	cfg := procsConfig(t, "docker", fault.ClientPause)
	run := runProcs(t, cfg)
	if run.Result.Acquisitions < 10 {
		t.Fatalf("only %d acquisitions in %v", run.Result.Acquisitions, cfg.Duration)
	}
	if past, _ := checkStops(t, run); past == 0 {
		t.Fatalf("no stop held past its validity in %v", cfg.Duration)
	}
}

// TestClientProcsKilled kills a client process while its acquire is in
// flight for certain: another client holds the lock, stopped (client-pause)
// before its validity ended, so no acquire can complete. The killed
// process's acquire must end failed, with the cause, not pending or lost;
// the other processes go on, and the run ends on time.
func TestClientProcsKilled(t *testing.T) {
	cfg := procsConfig(t, "process", fault.ClientPause)
	var (
		mu         sync.Mutex // protects the fields below
		pids       = map[int]int{}
		inflight   = map[int]history.Op{} // each client's acquire, while in flight
		killed     = -1
		killedOp   history.Op
		killedAt   time.Duration
		holder     = -1
		validUntil time.Duration
	)
	kill := func(client int, now time.Duration) { // mu held
		if err := syscall.Kill(pids[client], syscall.SIGKILL); err != nil {
			t.Errorf("kill client %d: %v", client, err)
			return
		}
		killed, killedOp, killedAt = client, inflight[client], now
	}
	cfg = chaos.WithProcHooks(cfg,
		func(client, pid int, op history.Op) {
			mu.Lock()
			defer mu.Unlock()
			pids[client] = pid
			if op.Kind != history.KindAcquire {
				return
			}
			if op.Outcome != history.Pending {
				delete(inflight, client)
				return
			}
			inflight[client] = op
			if killed < 0 && holder >= 0 && client != holder && op.Invoke < validUntil {
				kill(client, op.Invoke)
			}
		},
		func(client, pid int, vu, now time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			if killed >= 0 || now >= vu {
				return
			}
			holder, validUntil = client, vu
			for c, op := range inflight {
				// Invoked within a TTL: far from its own 2*TTL deadline.
				if c != client && now-op.Invoke < cfg.TTL {
					kill(c, now)
					return
				}
			}
		})
	run := runProcs(t, cfg)
	mu.Lock()
	defer mu.Unlock()
	if killed < 0 {
		t.Fatalf("no client process was killed: no stop came with another client acquiring")
	}
	var p report.ClientProc
	for _, cp := range run.ClientProcs {
		if cp.Client == killed {
			p = cp
		}
	}
	t.Logf("killed client %d (pid %d) at %v, its acquire invoked at %v, while client %d was stopped until its validity end %v",
		killed, p.PID, killedAt, killedOp.Invoke, holder, validUntil)
	if p.Exit != "signal: killed" {
		t.Errorf("killed client %d ended with %q", killed, p.Exit)
	}
	if err := syscall.Kill(p.PID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("killed client process %d: still there (kill 0: %v)", p.PID, err)
	}
	var got *history.Op
	others := 0
	for i, op := range run.History.Ops {
		switch {
		case op.Client == killed && op.Kind == history.KindAcquire && op.Invoke == killedOp.Invoke:
			got = &run.History.Ops[i]
		case op.Client == killed && op.Kind != history.KindFault && op.Invoke > killedAt:
			t.Errorf("op %d of the killed client invoked at %v, after it was killed at %v", op.ID, op.Invoke, killedAt)
		case op.Client != killed && op.Kind == history.KindAcquire && op.Outcome == history.OK && op.Invoke > killedAt:
			others++
		}
	}
	switch {
	case got == nil:
		t.Fatalf("the killed client's acquire (invoked at %v) is not in the history", killedOp.Invoke)
	case got.Outcome != history.Failed || !strings.Contains(got.Err, "ended (signal: killed) with this operation in flight"):
		t.Errorf("the killed client's acquire: outcome %q, err %q; want failed, saying the process was killed", got.Outcome, got.Err)
	case got.Complete < killedAt:
		t.Errorf("the killed client's acquire completed at %v, before the kill at %v", got.Complete, killedAt)
	}
	if others == 0 {
		t.Errorf("no other client acquired after the kill")
	}
}

// procsParentEnv makes TestClientProcsParentHelper run: the parent that
// TestClientProcsDieWithParent kills.
const procsParentEnv = "FENCEDLOCK_TEST_PROCS_PARENT"

// TestClientProcsParentHelper is not a test: TestClientProcsDieWithParent
// runs the test binary with it as a chaos run's parent process, and kills it.
func TestClientProcsParentHelper(t *testing.T) {
	if os.Getenv(procsParentEnv) == "" {
		return // not a test of its own
	}
	_, err := chaos.Run(t.Context(), chaos.Config{Nodes: 3, Clients: 2, Duration: time.Minute,
		Faults: []fault.Kind{}, ClientProcs: true, TTL: time.Second, NodeTimeout: 200 * time.Millisecond})
	t.Fatalf("the run was to be killed, but ended: %v", err)
}

// TestClientProcsDieWithParent kills the parent of a run's client processes
// (SIGKILL: no cleanup of its own): the client processes must not outlive
// it.
func TestClientProcsDieWithParent(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe, "-test.run=^TestClientProcsParentHelper$")
	parent.Env = append(os.Environ(), procsParentEnv+"=1")
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = parent.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = parent.Process.Kill()
		<-exited
	})
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	var kids []int
	for len(kids) < 2 {
		select {
		case <-exited:
			t.Fatalf("the parent ended before its client processes started: %v", parent.ProcessState)
		case <-t.Context().Done():
			t.Fatal("the client processes did not start")
		case <-tick.C:
		}
		kids = clientProcsOf(parent.Process.Pid)
	}
	if err := parent.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	for {
		alive := 0
		for _, pid := range kids {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil && !zombie(pid) {
				alive++
			}
		}
		if alive == 0 {
			return
		}
		select {
		case <-t.Context().Done():
			t.Fatalf("client processes %v outlived their parent", kids)
		case <-tick.C:
		}
	}
}

// clientProcsOf lists the client processes whose parent is ppid, from /proc.
func clientProcsOf(ppid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		env, err2 := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || err2 != nil {
			continue
		}
		f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) && strings.Contains(string(env), chaos.ClientProcEnv+"=1") {
			out = append(out, pid)
		}
	}
	return out
}

func zombie(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}

// printTimeEnv makes the test binary print time.Now's Unix seconds and exit.
const printTimeEnv = "FENCEDLOCK_TEST_PRINT_TIME"

// TestLibfaketimeMissesGo shows why a client process's skewed clock is a
// clock.Clock of its own and not libfaketime: preloaded into a Go program,
// libfaketime moves date(1)'s clock a day back but not Go's time.Now, which
// reads the clock through the vDSO, never through libc.
func TestLibfaketimeMissesGo(t *testing.T) {
	lib := faketime.Find()
	if lib == "" {
		testenv.SkipOrFail(t, "libfaketime not found: install faketime")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), faketime.Env(lib, "-1d")...)
	unix := func(name string, args []string, extra ...string) int64 {
		t.Helper()
		cmd := exec.CommandContext(t.Context(), name, args...)
		cmd.Env = append(env, extra...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(out)), 10, 64)
		if err != nil {
			t.Fatalf("%s printed %q", name, out)
		}
		return n
	}
	now := time.Now().Unix()
	date := unix("date", []string{"+%s"})
	goNow := unix(exe, nil, printTimeEnv+"=1")
	t.Logf("real %d, date under libfaketime %d, Go under libfaketime %d", now, date, goNow)
	if d := now - date; d < 23*3600 || d > 25*3600 {
		t.Fatalf("libfaketime did not move date's clock a day back (%ds): the test shows nothing", d)
	}
	if d := goNow - now; d < -3600 || d > 3600 {
		t.Fatalf("libfaketime moved Go's clock by %ds: client processes could use it", d)
	}
}
