package netfault

import (
	"sync"
	"time"

	"github.com/Shopify/toxiproxy/v2/stream"
	"github.com/Shopify/toxiproxy/v2/toxics"
)

// gateType is the toxiproxy toxic type of the gate. Toxiproxy finds toxics by
// name in its registry, so the gate registers itself once, like the built-in
// toxics do.
const gateType = "fencedlock_gate"

func init() { toxics.Register(gateType, new(gate)) }

// State is what a node's proxy does to the bytes crossing it: pass them,
// delay them, drop them all (a partition), or drop only the replies (the
// node applies every request and its answers are lost). The proxy's two
// gates, one per direction, share it.
//
// Why a toxic of our own rather than toxiproxy's latency and timeout toxics:
// changing a built-in toxic means UpdateToxicJson, which rewrites the toxic's
// fields while the links' goroutines read them (a data race), or RemoveToxic,
// which can strand a link's goroutines when data arrives during the removal.
// The gates are installed once, before the proxy starts, and never changed;
// faults only change this state, under its mutex.
type State struct {
	mu          sync.Mutex // protects partitioned, dropReplies, latency, changed
	partitioned bool
	dropReplies bool
	latency     time.Duration // per round trip: half on the way in, half on the way out
	changed     chan struct{} // closed and replaced on every change, so that waiting gates look again

	done      chan struct{} // closed by close: gates stop holding data back
	closeOnce sync.Once
}

// NewState returns a state that passes every byte at once.
func NewState() *State {
	return &State{changed: make(chan struct{}), done: make(chan struct{})}
}

// View is a State as it was at one moment.
type View struct {
	Partitioned bool
	DropReplies bool // server-to-client bytes are dropped; client-to-server ones pass
	Latency     time.Duration
	Changed     <-chan struct{} // closed at the next change
}

// View returns the state now.
func (s *State) View() View {
	s.mu.Lock()
	defer s.mu.Unlock()
	return View{s.partitioned, s.dropReplies, s.latency, s.changed}
}

func (s *State) update(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f()
	close(s.changed)
	s.changed = make(chan struct{})
}

// SetPartitioned drops every byte (true) or passes them again (false).
func (s *State) SetPartitioned(p bool) { s.update(func() { s.partitioned = p }) }

// SetDropReplies drops every byte from the node to its clients (true), while
// their requests still reach it, or passes them again (false): what a client
// sees when its connection dies right after the node applied its command.
func (s *State) SetDropReplies(d bool) { s.update(func() { s.dropReplies = d }) }

// SetLatency delays each round trip by d; 0 removes the delay.
func (s *State) SetLatency(d time.Duration) { s.update(func() { s.latency = d }) }

// Done is closed by Close.
func (s *State) Done() <-chan struct{} { return s.done }

// Close stops the gates from holding data back, for good.
func (s *State) Close() { s.closeOnce.Do(func() { close(s.done) }) }

// gate is the toxic at the end of each direction of a node's proxy. Under a
// partition it drops every chunk (the bytes are lost, as on a link that drops
// packets, and the client's request times out); otherwise it holds each chunk
// until its share of the latency has passed since the proxy read it.
//
// It never blocks for good: a chunk waits at most its latency (the proxy
// keeps reading meanwhile, into the gate's buffer), and once the backend
// closes, the gate stops handing chunks on and discards the rest of the
// stream, so neither the stubs before it nor a link whose writer has died
// can be stranded (toxiproxy's own toxics can block on such a link for good).
type gate struct {
	st       *State // set once, before the proxy starts
	upstream bool   // client to server
}

// GetBufferSize lets the proxy keep reading while chunks wait out the latency
// (as toxiproxy's latency toxic does), so delays do not add up.
func (g *gate) GetBufferSize() int { return 1024 }

// Pipe implements toxics.Toxic.
func (g *gate) Pipe(stub *toxics.ToxicStub) {
	for {
		select {
		case <-stub.Interrupt: // the chain is never changed, but honour it
			return
		case c := <-stub.Input:
			if c == nil {
				stub.Close()
				return
			}
			if !g.pass(stub, c) {
				g.drain(stub)
				return
			}
		}
	}
}

// share is this direction's part of the round-trip latency d.
func (g *gate) share(d time.Duration) time.Duration {
	if g.upstream {
		return d / 2
	}
	return d - d/2
}

// pass hands c on once its delay has passed, or drops it under a partition.
// It reports false when the backend is closing.
func (g *gate) pass(stub *toxics.ToxicStub, c *stream.StreamChunk) bool {
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		v := g.st.View()
		if v.Partitioned || v.DropReplies && !g.upstream {
			return true // dropped
		}
		wait := g.share(v.Latency) - time.Since(c.Timestamp)
		if wait <= 0 {
			select {
			case stub.Output <- c:
				return true
			case <-g.st.done:
				return false
			}
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-timer.C:
		case <-v.Changed: // healed, partitioned or latency changed: look again
		case <-g.st.done:
			return false
		}
	}
}

// drain discards the rest of the stream after close, until the proxy closes
// the connection and the input ends.
func (g *gate) drain(stub *toxics.ToxicStub) {
	for c := range stub.Input {
		if c == nil {
			break
		}
	}
	stub.Close()
}
