package fencing_test

import (
	"bytes"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// lostReplyProxy forwards TCP connections to a Redis server. Once armed, it
// lets the next script call (EVALSHA or EVAL) reach the server, then drops
// the server's reply and closes that connection: the server applied the call,
// the client never hears of it. That is the one thing a real server cannot be
// made to do on demand, and what makes a client retry a call that succeeded.
type lostReplyProxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	onDrop func() // runs after a reply was dropped, before the client's connection closes

	dropped atomic.Int32 // replies dropped
	scripts atomic.Int32 // script calls forwarded (retries included)

	wg    sync.WaitGroup
	mu    sync.Mutex // protects conns
	conns []net.Conn
}

func newLostReplyProxy(t *testing.T, target string) *lostReplyProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lostReplyProxy{ln: ln, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *lostReplyProxy) addr() string { return p.ln.Addr().String() }

// arm makes the proxy drop the reply to the next script call; onDrop runs
// once it did.
func (p *lostReplyProxy) arm(onDrop func()) {
	p.onDrop = onDrop
	p.armed.Store(true)
}

func (p *lostReplyProxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		var drop atomic.Bool // this connection's next reply is dropped
		p.wg.Go(func() { p.requests(client, server, &drop) })
		p.wg.Go(func() { p.replies(server, client, &drop) })
	}
}

// requests copies client → server, marking the connection when the armed
// proxy sees a script call go by. The mark is set before the call is
// forwarded, so its reply cannot come back unmarked.
func (p *lostReplyProxy) requests(client, server net.Conn, drop *atomic.Bool) {
	defer server.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := client.Read(buf)
		if n > 0 {
			if isScriptCall(buf[:n]) {
				p.scripts.Add(1)
				if p.armed.CompareAndSwap(true, false) {
					drop.Store(true)
				}
			}
			if _, werr := server.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *lostReplyProxy) replies(server, client net.Conn, drop *atomic.Bool) {
	defer client.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && drop.Load() {
			// The server has run the script: it replies only after.
			p.dropped.Add(1)
			if p.onDrop != nil {
				p.onDrop()
			}
			_ = server.Close()
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = server.Close()
			}
			return
		}
	}
}

func isScriptCall(b []byte) bool {
	b = bytes.ToLower(b)
	return bytes.Contains(b, []byte("\r\nevalsha\r\n")) || bytes.Contains(b, []byte("\r\neval\r\n"))
}

func (p *lostReplyProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
