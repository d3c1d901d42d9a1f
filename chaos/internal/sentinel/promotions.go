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
// failover asked for. f must not block.
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
// node is in progress.
func (p *Promotions) Promoted(node int) {
	p.mu.Lock()
	f, asked := p.listen, p.asking[node] > 0
	p.mu.Unlock()
	if f != nil && !asked {
		f(node, time.Now())
	}
}
