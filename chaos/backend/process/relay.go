package process

import (
	"io"
	"net"
	"sync"
)

// relay forwards each connection from its own loopback address to a target
// that can change: the upstream of a replicated node's fault proxy, which
// follows the pair's current primary. Retarget closes every connection to
// the old target, as the clients of a primary that failed over see theirs
// end, and sends new ones to the new target. A relay is safe for concurrent
// use.
type relay struct {
	ln net.Listener
	wg sync.WaitGroup // accept loop and pumps

	mu     sync.Mutex // protects target, conns, closed
	target string
	conns  map[net.Conn]struct{}
	closed bool
}

// startRelay listens on a free loopback port and forwards to target.
func startRelay(target string) (*relay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &relay{ln: ln, target: target, conns: make(map[net.Conn]struct{})}
	r.wg.Go(r.accept)
	return r, nil
}

func (r *relay) addr() string { return r.ln.Addr().String() }

// retarget sends new connections to target and closes those to the old
// one. The same target again changes nothing.
func (r *relay) retarget(target string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if target == r.target {
		return
	}
	r.target = target
	for c := range r.conns {
		_ = c.Close()
	}
	clear(r.conns)
}

// close stops listening, closes every connection and waits for the relay's
// goroutines to end.
func (r *relay) close() {
	r.mu.Lock()
	r.closed = true
	for c := range r.conns {
		_ = c.Close()
	}
	clear(r.conns)
	r.mu.Unlock()
	_ = r.ln.Close()
	r.wg.Wait()
}

func (r *relay) accept() {
	for {
		client, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.mu.Lock()
		target := r.target
		r.mu.Unlock()
		// A dial to a frozen primary still succeeds (the kernel accepts):
		// the client then waits on it as on any frozen node.
		server, err := net.Dial("tcp", target)
		if err != nil {
			_ = client.Close()
			continue
		}
		if !r.track(target, client, server) {
			continue
		}
		r.wg.Go(func() { r.pump(server, client) })
		r.wg.Go(func() { r.pump(client, server) })
	}
}

// track registers a connection pair dialled to target, or closes it when
// the relay closed or was retargeted in the meantime.
func (r *relay) track(target string, conns ...net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed || target != r.target {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		r.conns[c] = struct{}{}
	}
	return true
}

// pump copies src to dst until either fails, then closes both.
func (r *relay) pump(dst, src net.Conn) {
	_, _ = io.Copy(dst, src)
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range []net.Conn{dst, src} {
		_ = c.Close()
		delete(r.conns, c)
	}
}
