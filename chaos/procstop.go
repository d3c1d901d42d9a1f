package chaos

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
	"github.com/fencedlock/fencedlock/chaos/report"
)

// stopPastValidity is client-pause on a client process, which has acquired
// the hold with token tok and waits before its write: SIGSTOP, held until
// the TTL/2 past the hold's validity end, then SIGCONT — the whole process
// frozen, its timers and goroutines included, as by a GC pause or a VM
// freeze. The process then writes as if nothing happened. The fault is
// recorded from just before the SIGSTOP to just before the SIGCONT, which
// the process cannot act within; one that could not be sent or
// did not take (the process not seen stopped) is recorded as failed.
func (p *procClient) stopPastValidity(tok uint64) {
	if p.set.runCtx.Err() != nil {
		p.send(procCommand{Cmd: cmdResume}) // the run is over: finish the hold
		return
	}
	validUntil := p.validUntil(tok)
	start := time.Now()
	err := p.sigstop()
	if f := p.set.cfg.onProcStop; f != nil && err == nil {
		f(p.id, p.pid, validUntil, p.set.rec.Now())
	}
	if err == nil {
		sleepReal(p.set.runCtx, validUntil+p.set.cfg.TTL/2-p.set.rec.Offset(time.Now()))
	}
	p.send(procCommand{Cmd: cmdResume}) // before SIGCONT: read the moment it runs again
	end := time.Now()                   // stopped until now at least: it may run at once
	if cerr := syscall.Kill(p.pid, syscall.SIGCONT); cerr != nil && err == nil {
		err = fmt.Errorf("SIGCONT to client process %d: %w", p.pid, cerr)
	}
	p.rec.FaultAt(fault.ClientPause, start, end, err)
	if err == nil {
		p.mu.Lock()
		p.stops = append(p.stops, report.Stop{Token: tok,
			AtMs: ms(p.set.rec.Offset(start)), ForMs: ms(end.Sub(start)),
			ValidUntilMs: ms(validUntil)})
		p.mu.Unlock()
	}
}

// validUntil is the validity end of p's latest successful acquire with
// token tok.
func (p *procClient) validUntil(tok uint64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var v time.Duration
	for _, id := range p.order {
		if op := p.ops[id]; op.Kind == history.KindAcquire && op.Outcome == history.OK && op.Token == tok {
			v = op.ValidUntil
		}
	}
	return v
}

// procStopTimeout bounds the wait for a SIGSTOP to take.
const procStopTimeout = 5 * time.Second

// sigstop stops p and waits until the kernel shows it stopped (where it
// can tell).
func (p *procClient) sigstop() error {
	if err := syscall.Kill(p.pid, syscall.SIGSTOP); err != nil {
		return fmt.Errorf("SIGSTOP to client process %d: %w", p.pid, err)
	}
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(procStopTimeout)
	for {
		stopped, known := procStopped(p.pid)
		if stopped || !known {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("client process %d not stopped %v after SIGSTOP", p.pid, procStopTimeout)
		}
		<-tick.C
	}
}

// procTrigger is kill-during-acquire through a client process: the process
// hooks its node connections (childTrigger) and, armed for a node, says
// when an acquire script is about to reach it and waits; the trigger kills
// the node and lets the script go on.
type procTrigger struct {
	p     *procClient
	armed []atomic.Bool
	kills chan kill
}

func newProcTrigger(p *procClient) *procTrigger {
	return &procTrigger{p: p, armed: make([]atomic.Bool, p.set.cfg.Nodes), kills: make(chan kill, 1)}
}

func (t *procTrigger) arm(node int) {
	t.armed[node].Store(true)
	t.p.send(procCommand{Cmd: cmdArm, Node: node})
}

func (t *procTrigger) disarm(node int) bool {
	if !t.armed[node].CompareAndSwap(true, false) {
		return false
	}
	t.p.send(procCommand{Cmd: cmdDisarm, Node: node})
	return true
}

func (t *procTrigger) fired() <-chan kill { return t.kills }

// fire kills node, if still armed for it, and lets the process go on.
func (t *procTrigger) fire(node int) {
	defer t.p.send(procCommand{Cmd: cmdKilled, Node: node})
	if node < 0 || node >= len(t.armed) || !t.armed[node].CompareAndSwap(true, false) {
		return
	}
	at := time.Now()
	t.kills <- kill{at, t.p.set.b.Kill(context.WithoutCancel(t.p.set.runCtx), node)}
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
