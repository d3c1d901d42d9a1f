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

// scriptBody is the text the Client sends for the script file name: the
// scripts that touch a key's waiting set have waiting.lua prepended.
func scriptBody(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("scripts/" + name)
	if err != nil {
		t.Fatal(err)
	}
	switch name {
	case "acquire.lua", "release.lua", "withdraw.lua":
		w, err := os.ReadFile("scripts/waiting.lua")
		if err != nil {
			t.Fatal(err)
		}
		return string(w) + string(b)
	}
	return string(b)
}

// scriptSHA is the SHA1 that EVALSHA names the script file by.
func scriptSHA(t testing.TB, name string) string {
	t.Helper()
	h := sha1.Sum([]byte(scriptBody(t, name)))
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
	return &replyGate{sha: scriptSHA(t, script), body: scriptBody(t, script), held: make(chan struct{}, 64), open: make(chan struct{})}
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
