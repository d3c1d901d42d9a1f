package redlock_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"os"
	"slices"
	"sync"
	"testing"

	"github.com/redis/go-redis/v9"
)

// scriptSHA is the SHA1 that EVALSHA names the script file by.
func scriptSHA(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("scripts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	h := sha1.Sum(b)
	return hex.EncodeToString(h[:])
}

// replyGate is a go-redis hook that, while armed, holds back the replies to
// one script after the node has applied it: a reply that is slow to come
// back, at a moment the test chooses — what a real server cannot do on
// demand. Every held reply is announced on held.
type replyGate struct {
	sha, body string
	held      chan struct{}

	mu    sync.Mutex // protects armed, open
	armed bool
	open  chan struct{} // closed by release
}

func newReplyGate(t testing.TB, script string) *replyGate {
	b, err := os.ReadFile("scripts/" + script)
	if err != nil {
		t.Fatal(err)
	}
	return &replyGate{sha: scriptSHA(t, script), body: string(b), held: make(chan struct{}, 64), open: make(chan struct{})}
}

func (g *replyGate) arm() {
	g.mu.Lock()
	g.armed = true
	g.mu.Unlock()
}

// release lets every held reply through and disarms the gate.
func (g *replyGate) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.armed {
		g.armed = false
		close(g.open)
		g.open = make(chan struct{})
	}
}

func (g *replyGate) matches(cmds ...redis.Cmder) bool {
	return slices.ContainsFunc(cmds, func(c redis.Cmder) bool {
		a := c.Args()
		// Only replies of calls the node applied: a NOSCRIPT is followed
		// by an EVAL of the body.
		return len(a) > 1 && (a[1] == g.sha || a[1] == g.body) && c.Err() == nil
	})
}

// hold waits at the gate if it is armed.
func (g *replyGate) hold() {
	g.mu.Lock()
	armed, open := g.armed, g.open
	g.mu.Unlock()
	if armed {
		g.held <- struct{}{}
		<-open
	}
}

func (g *replyGate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *replyGate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil && g.matches(cmd) {
			g.hold()
		}
		return err
	}
}
func (g *replyGate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if err == nil && g.matches(cmds...) {
			g.hold()
		}
		return err
	}
}
