// Package relay is the hop between a node's fault proxy and the server
// behind it, for servers whose address changes while clients keep the
// proxy's: a container that Docker publishes on a new port after every
// start and network reconnect, or the current primary of a pair that
// Sentinel fails over.
package relay

import (
	"io"
	"net"
	"sync"
	"time"

	"github.com/fencedlock/fencedlock/chaos/internal/netfault"
)

// Relay forwards each connection from its own loopback address to the
// upstream address it was last given (SetUpstream, Retarget).
//
// While the node is down (no address), the relay closes each connection at
// once: clients see a reset, as from a dead server. While the node is
// partitioned (its netfault.State says so; the proxy's gates drop every
// byte meanwhile), the relay never closes a client's connection, even when
// the server side goes away (disconnecting a container from its network
// makes Docker drop the published port and its connections): it holds it,
// discarding its bytes, until the partition heals, and closes it then. So a
// partition looks like packet loss to clients, not like a refusal. A Relay
// is safe for concurrent use.
type Relay struct {
	ln   net.Listener
	st   *netfault.State // the node's fault state, shared with its proxy's gates
	done chan struct{}   // closed by Close

	mu       sync.Mutex // protects upstream, conns, closed
	upstream string     // the server's address; "" while down
	conns    map[net.Conn]struct{}
	closed   bool

	wg sync.WaitGroup // the accept loop and one per connection
}

// dialTimeout bounds the relay's dial to the server: a local process, or
// a port published by a local engine, answers in microseconds or refuses at
// once.
const dialTimeout = time.Second

// New listens on a free loopback port, with no upstream yet; st is the
// node's fault state, shared with its proxy.
func New(st *netfault.State) (*Relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &Relay{ln: ln, st: st, done: make(chan struct{}), conns: make(map[net.Conn]struct{})}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is where the proxy forwards to.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// SetUpstream points new connections at addr ("" while the node is down).
// Connections already open stay as they are.
func (r *Relay) SetUpstream(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.upstream = addr
}

// Retarget points new connections at addr and, if that is a change,
// closes every open one: the clients of a primary that failed over see
// their connections end, and dial the new primary.
func (r *Relay) Retarget(addr string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if addr == r.upstream {
		return
	}
	r.upstream = addr
	for c := range r.conns {
		_ = c.Close()
	}
}

func (r *Relay) target() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.upstream
}

// track adds c to the open connections, or reports false once closed.
func (r *Relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// trackTo adds u, dialled to up, to the open connections, or reports false
// once closed or pointed elsewhere meanwhile: a connection to the old
// primary must not outlive a Retarget that raced with its dial.
func (r *Relay) trackTo(up string, u net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || r.upstream != up {
		return false
	}
	r.conns[u] = struct{}{}
	return true
}

func (r *Relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		if !r.track(c) {
			_ = c.Close()
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer r.untrack(c)
			defer c.Close()
			r.serve(c)
		}()
	}
}

// serve forwards c to the server until either side ends.
func (r *Relay) serve(c net.Conn) {
	if r.st.View().Partitioned {
		r.hold(c)
		return
	}
	up := r.target()
	if up == "" {
		return // down: closed at once
	}
	u, err := net.DialTimeout("tcp", up, dialTimeout)
	if err != nil {
		r.hold(c)
		return
	}
	if !r.trackTo(up, u) {
		_ = u.Close()
		return
	}
	defer r.untrack(u)
	ended := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(u, c); ended <- struct{}{} }()
	go func() { _, _ = io.Copy(c, u); ended <- struct{}{} }()
	<-ended
	_ = u.Close()
	r.hold(c) // the server side may have gone with a partition
	_ = c.Close()
	<-ended
}

// hold keeps c open while the node is partitioned, discarding what arrives,
// and returns when the partition heals, the client closes c, or the relay
// closes. It returns at once if the node is not partitioned.
func (r *Relay) hold(c net.Conn) {
	if !r.st.View().Partitioned {
		return
	}
	gone := make(chan struct{})
	go func() { _, _ = io.Copy(io.Discard, c); close(gone) }()
	defer func() { _ = c.Close(); <-gone }()
	for {
		v := r.st.View()
		if !v.Partitioned {
			return
		}
		select {
		case <-v.Changed:
		case <-gone:
			return
		case <-r.done:
			return
		}
	}
}

// Close stops accepting, closes every open connection and waits for the
// relay's goroutines to end.
func (r *Relay) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.done)
	for c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	_ = r.ln.Close()
	r.wg.Wait()
}
