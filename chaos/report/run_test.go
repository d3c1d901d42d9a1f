package report

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/chaos/checker"
	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/recorder"
	"github.com/fencedlock/fencedlock/clock"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// workload plays a run on a fake clock: clients take turns on one key,
// write to a fenced store, and release, while faults come and go.
type workload struct {
	clk     *clock.Fake
	mem     *recorder.Memory
	rec     *recorder.Recorder
	clients []*recorder.Client // client i: index i in the history
	token   uint64
	n       int // writes so far, for unique entries
	store   []string
}

func newWorkload(nodes int) *workload {
	clk := clock.NewFake(time.Unix(0, 0))
	w := &workload{clk: clk, mem: recorder.NewMemory()}
	w.rec = recorder.New(w.mem, recorder.WithClock(clk), recorder.WithNodes(nodes))
	for i := range 4 {
		w.clients = append(w.clients, w.rec.Client(fmt.Sprint("client ", i)))
	}
	return w
}

func (w *workload) step(d time.Duration) { w.clk.Advance(d) }

func (w *workload) acquire(client int) recorder.Hold {
	a := w.clients[client].Acquire("job")
	w.step(time.Millisecond + time.Duration(w.token%3)*300*time.Microsecond)
	w.token++
	return a.Value(fmt.Sprintf("v%d", w.token)).OK(w.token, w.clk.Now().Add(30*time.Millisecond))
}

// write writes under h; the store takes it unless reject is set.
func (w *workload) write(h recorder.Hold, reject bool) {
	w.n++
	entry := fmt.Sprintf("e%d", w.n)
	c := h.Write("table", entry)
	w.step(500 * time.Microsecond)
	if reject {
		c.Rejected()
		return
	}
	w.store = append(w.store, entry)
	c.Seq(uint64(len(w.store))).Accepted()
}

func (w *workload) release(h recorder.Hold, lost bool) {
	r := h.Release()
	w.step(500 * time.Microsecond)
	if lost {
		r.LockLost()
	} else {
		r.OK()
	}
}

func (w *workload) turn(client int) {
	if client%2 == 1 {
		w.clients[(client+1)%4].Acquire("job").Fail(errors.New("not acquired"))
	}
	h := w.acquire(client)
	w.write(h, false)
	w.step(4 * time.Millisecond)
	w.release(h, false)
	w.step(time.Millisecond)
}

// sampleRun is a run of 4 clients on 5 nodes with node faults and a client
// paused past its validity (an expected overlap; its stale write rejected).
// With broken set, two clients also hold at once with no fault to blame, and
// an acknowledged write goes missing from the store.
func sampleRun(broken bool) Run {
	w := newWorkload(5)
	kill := w.rec.NodeFault(fault.Kill, 1)
	for i := range 8 {
		w.turn(i % 4)
	}
	kill.End()
	lat := w.rec.NodeFault(fault.Latency, 3)

	paused := w.acquire(2)
	w.write(paused, false)
	pause := w.clients[2].Fault(fault.ClientPause)
	w.step(30 * time.Millisecond)
	paused.Lost()
	w.turn(3)
	pause.End()
	w.write(paused, true)
	w.release(paused, true)
	lat.End()

	part := w.rec.NodeFault(fault.Partition, 4)
	for i := range 8 {
		w.turn(i % 4)
	}
	part.End()
	if broken {
		a, b := w.acquire(0), w.acquire(1)
		w.write(b, false)
		w.write(a, false)
		w.step(2 * time.Millisecond)
		w.release(a, false)
		w.release(b, false)
		w.store = w.store[1:]
	}
	w.turn(1)
	w.rec.Store("table", w.store)
	h := w.mem.History()
	run := Run{Clients: 4, Duration: h.End, Backend: "process", Seed: 7, History: h,
		Result: checker.Check(h, checker.CheckOptions{})}
	if broken { // and a requested late write that never happened
		run.Requested = []fault.Kind{fault.Kill, fault.Latency, fault.Partition, fault.ClientPause, fault.LateWrite}
	}
	return run
}
