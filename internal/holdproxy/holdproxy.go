// Package holdproxy is a loopback TCP proxy for tests that can hold back a
// server's replies: while held, the requests still reach the server and are
// carried out, but what the server answers waits in the proxy until Release.
// That is a reply that arrives as late as the test chooses, after the
// client's own deadline, which no real server produces on demand.
//
// It can also cut the link both ways, as a network partition does: while
// partitioned, the bytes in either direction are dropped, so requests are
// neither carried out nor answered and the client's calls time out.
//
// A Proxy is safe for concurrent use.
package holdproxy

import (
	"net"
	"sync"
)

// Proxy forwards connections from its own loopback address to an upstream
// address.
type Proxy struct {
	ln       net.Listener
	upstream string
	wg       sync.WaitGroup // accept loop and pumps
	done     chan struct{}  // closed by Close

	mu     sync.Mutex // protects flow, held, conns, cut, lossy, closed
	flow   chan struct{}
	held   int // chunks of replies read from the server, not yet passed on
	conns  map[net.Conn]struct{}
	cut    bool                  // partitioned: bytes both ways are dropped
	lossy  map[net.Conn]struct{} // both ends of each pair that lost bytes to the cut
	closed bool
}

// Start listens on a free loopback port and forwards to upstream.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	flow := make(chan struct{})
	close(flow)
	p := &Proxy{ln: ln, upstream: upstream, done: make(chan struct{}), flow: flow,
		conns: make(map[net.Conn]struct{}), lossy: make(map[net.Conn]struct{})}
	p.wg.Go(p.accept)
	return p, nil
}

// Addr is the proxy's host:port, for the client to dial.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Hold keeps every reply read from the server from now on in the proxy
// until Release. (A chunk already on its way to the client still passes.)
func (p *Proxy) Hold() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flow:
		p.flow = make(chan struct{})
	default: // already held
	}
}

// Release lets the held replies through, in order, and the next ones too.
func (p *Proxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.flow:
	default:
		close(p.flow)
	}
}

// Held is the number of reply chunks the server sent that the client has
// not been given yet: > 0 means the server answered and the answer waits.
func (p *Proxy) Held() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.held
}

// Partition cuts the link both ways: from now on every byte read from a
// client or from the server is dropped, on the connections open now and on
// those accepted meanwhile. A client's call then times out, and its request
// never reaches the server. (A new dial still succeeds, as the proxy
// accepts it; its first call times out instead.)
func (p *Proxy) Partition() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
}

// Heal ends a partition. The connections that lost bytes to it are closed
// first: their streams have a gap, so neither end could read them any more
// (a real connection would have timed out and been reset). Connections that
// stayed idle carry on.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
	for c := range p.lossy {
		_ = c.Close()
		delete(p.conns, c)
	}
	clear(p.lossy)
}

// Close stops listening, closes every connection (held replies are lost)
// and waits for the proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	for c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	err := p.ln.Close()
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return // closed
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !p.track(client, server) {
			return
		}
		p.wg.Go(func() { p.requests(client, server) })
		p.wg.Go(func() { p.replies(server, client) })
	}
}

// track registers a connection pair, or closes it when the proxy closed.
func (p *Proxy) track(conns ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		p.conns[c] = struct{}{}
	}
	return true
}

// requests copies the client's requests to the server as they come, but
// for those read during a partition.
func (p *Proxy) requests(client, server net.Conn) {
	defer p.drop(client, server)
	buf := make([]byte, 32<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 && !p.dropped(client, server) {
			if _, err := server.Write(buf[:n]); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// dropped reports whether the chunk just read on the pair (client, server)
// falls to a partition, and if so marks the pair lossy for Heal to close.
func (p *Proxy) dropped(client, server net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		return false
	}
	p.lossy[client], p.lossy[server] = struct{}{}, struct{}{}
	return true
}

// replies copies the server's replies to the client, each chunk once the
// proxy is not holding.
func (p *Proxy) replies(server, client net.Conn) {
	defer p.drop(client, server)
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 {
			if !p.pass(client, server, buf[:n]) {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits until replies flow, then writes b to the client, or drops it
// under a partition. It reports false when the proxy or the connection
// closed.
func (p *Proxy) pass(client, server net.Conn, b []byte) bool {
	p.mu.Lock()
	p.held++
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.held--
		p.mu.Unlock()
	}()
	p.mu.Lock()
	flow := p.flow
	p.mu.Unlock()
	select {
	case <-flow:
	case <-p.done:
		return false
	}
	if p.dropped(client, server) {
		return true
	}
	_, err := client.Write(b)
	return err == nil
}

// drop closes both ends of a connection pair.
func (p *Proxy) drop(conns ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(p.conns, c)
		delete(p.lossy, c)
	}
}
