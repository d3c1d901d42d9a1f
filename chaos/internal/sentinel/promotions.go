package sentinel

import (
	"sync"
	"time"
)

// Promotions tells a listener of the promotions Sentinel made that no
// failover fault asked for: a primary that another fault (a kill, a pause,
// a cut from Sentinel) kept from Sentinel past its down-after is failed over,
// as in production, and the replica it promotes lacks what had not reached
// it — the same loss as a failover fault's, which a history must show. A
// zero Promotions is ready; its methods are safe for concurrent use.
type Promotions struct {
	mu     sync.Mutex // protects listen, asking
	listen func(node int, at time.Time)
	asking map[int]int // node → failovers in progress there
}

// Listen sets f, called with the node and the time of each promotion no
// failover asked for. f must not block, nor call p's methods.
func (p *Promotions) Listen(f func(node int, at time.Time)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.listen = f
}

// Asking marks a failover of node in progress until done is called: the
// promotion it brings about is its own, not reported.
func (p *Promotions) Asking(node int) (done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.asking == nil {
		p.asking = make(map[int]int)
	}
	p.asking[node]++
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.asking[node]--; p.asking[node] == 0 {
			delete(p.asking, node)
		}
	}
}

// Promoted tells of a promotion on node: reported unless a failover of
// node is in progress. The listener is called under the lock, so that once
// Listen returns no report of the listener it replaced is still on its way.
func (p *Promotions) Promoted(node int) {
	if report := p.Moved(node); report != nil {
		report()
	}
}

// Moved decides whether a promotion on node is to be reported — it is,
// unless a failover of node is in progress — and returns the report, to
// be called once the caller lets go of its own locks (nil: none). A
// caller that holds, while it decides, the lock its failover reads the
// move under keeps that failover asking until the decision is made.
func (p *Promotions) Moved(node int) (report func()) {
	p.mu.Lock()
	asked := p.asking[node] > 0
	p.mu.Unlock()
	if asked {
		return nil
	}
	at := time.Now()
	return func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.listen != nil {
			p.listen(node, at)
		}
	}
}
