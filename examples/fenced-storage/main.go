// Command fenced-storage reproduces the failure every TTL lock has, and shows
// the fencing token stopping it. Client 1 takes the lock, checks that it is
// still valid, then stops (a GC pause) for longer than the lock's validity.
// The lock's keys really expire on the Redis nodes; client 2 takes the lock
// and writes. Client 1 wakes up still believing it holds the lock and writes
// too: the store refuses that write because its token is older than one it
// has already admitted. The program exits non-zero if the stale write got in.
//
//	go run ./examples/fenced-storage [--nodes h1:6379,h2:6379,h3:6379]
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/fencedlock/fencedlock/clock"
	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/internal/examplenodes"
	"github.com/fencedlock/fencedlock/redlock"
)

func main() { examplenodes.Main("fenced-storage", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	nodes, err := examplenodes.FromArgs(ctx, "fenced-storage", args, 3)
	if err != nil {
		return err
	}
	defer nodes.Close()

	// Two clients, as if in two processes: each has its own redlock.Client.
	client1, err := redlock.New(nodes.Clients)
	if err != nil {
		return err
	}
	defer client1.Close()
	client2, err := redlock.New(nodes.Clients)
	if err != nil {
		return err
	}
	defer client2.Close()

	// The storage: a fencing guard in Redis (on the first node here; your
	// storage service in production). One Lua script checks the token and
	// appends the entry in the same step, so nothing slips in between.
	store := fencing.NewRedis(nodes.Clients[0])
	resource := "report-" + uuid.NewString()[:8] // fresh per run: reruns on the same nodes start clean

	const key, ttl = "fenced-storage:report", 300 * time.Millisecond
	fmt.Fprintf(stdout, "nodes: %s\nlock %q ttl=%v, store: fencing.Redis on %s, resource %q\n",
		nodes, key, ttl, nodes.Addrs[0], resource)
	tl := newTimeline(stdout)

	l1, err := client1.Lock(ctx, key, ttl)
	if err != nil {
		return fmt.Errorf("client1: %w", err)
	}
	tl.printf("client1 acquired token=%d, valid for %v", l1.Token(), l1.TTL().Round(time.Millisecond))
	// Checking the lock before writing does not help: the pause can come
	// right after the check, which is exactly what happens now.
	tl.printf("client1 checks its lock (%v left), goes to write... and stops: GC pause", l1.TTL().Round(time.Millisecond))

	// Meanwhile client 2 waits for the lock, gets it once client 1's keys
	// have expired on the nodes, and writes.
	wrote2 := make(chan error, 1)
	go func() { wrote2 <- runClient2(ctx, client2, store, key, resource, ttl, tl) }()

	// The pause: no code of client 1 runs for twice its TTL. (It also waits
	// for client 2's write, so that the output reads the same on every run;
	// a real pause waits for nobody.)
	paused := time.Now()
	if err := clock.Real().Sleep(ctx, 2*ttl); err != nil {
		return err
	}
	if err := <-wrote2; err != nil {
		return fmt.Errorf("client2: %w", err)
	}
	tl.printf("client1 resumes after %v and finishes the write it started (its lock ran out %v ago)",
		time.Since(paused).Round(time.Millisecond), (-l1.TTL()).Round(time.Millisecond))

	// Client 1 writes with its old token. The store has admitted client 2's
	// newer token, so it must refuse.
	err = store.Append(ctx, resource, l1.Token(), "written by client1")
	switch {
	case errors.Is(err, fencing.ErrStaleToken):
		tl.printf("client1 writes with token=%d: REJECTED (%v)", l1.Token(), err)
	case err == nil:
		tl.printf("client1 writes with token=%d: ACCEPTED", l1.Token())
		return errors.New("the stale write was NOT rejected: client1 wrote after client2 with an older token")
	default:
		return fmt.Errorf("client1 write: %w", err)
	}
	// Unlock tells client 1 what happened, too late to matter.
	tl.printf("client1 Unlock: %v", l1.Unlock(ctx))

	log, err := store.Log(ctx, resource)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "stale write rejected: the store kept client2's data")
	for _, e := range log {
		fmt.Fprintf(stdout, "  %s: token=%d %q\n", resource, e.Token, e.Data)
	}
	return nil
}

// runClient2 is the second process: wait for the lock, write under its
// token, release.
func runClient2(ctx context.Context, c *redlock.Client, store *fencing.Redis, key, resource string, ttl time.Duration, tl *timeline) error {
	tl.printf("client2 waits for the lock")
	ctx, cancel := context.WithTimeout(ctx, 10*ttl) // bounded: the example must not hang
	defer cancel()
	l, err := c.Lock(ctx, key, ttl)
	if err != nil {
		return err
	}
	tl.printf("client2 acquired token=%d (client1's keys expired on the nodes)", l.Token())
	if err := store.Append(ctx, resource, l.Token(), "written by client2"); err != nil {
		return err
	}
	tl.printf("client2 writes with token=%d: ok", l.Token())
	if err := l.Unlock(ctx); err != nil && !errors.Is(err, redlock.ErrOutcomeUnknown) {
		return err
	}
	// ErrOutcomeUnknown: a node did not answer in time. The library sends
	// that release again until it lands, and the key expires at its TTL in
	// any case: nothing for the caller to do.
	return nil
}

// timeline prints lines stamped with the time since it began. It is safe for
// concurrent use: both clients print.
type timeline struct {
	mu    sync.Mutex // protects w
	w     io.Writer
	start time.Time
}

func newTimeline(w io.Writer) *timeline { return &timeline{w: w, start: time.Now()} }

func (t *timeline) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.w, "t=+%-5s ", fmt.Sprintf("%dms", time.Since(t.start).Milliseconds()))
	fmt.Fprintf(t.w, format+"\n", args...)
}
