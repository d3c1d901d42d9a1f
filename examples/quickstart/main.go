// Command quickstart is the first contact with fencedlock: it acquires a lock
// on a majority of three Redis nodes, prints its fencing token and validity,
// shows that a second caller is refused, and releases it.
//
//	go run ./examples/quickstart                       # starts 3 local redis-server
//	go run ./examples/quickstart --nodes h1:6379,h2:6379,h3:6379
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/fencedlock/fencedlock/internal/examplenodes"
	"github.com/fencedlock/fencedlock/redlock"
)

func main() { examplenodes.Main("quickstart", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	// In your service: one redis.NewClient(&redis.Options{Addr: ...}) per
	// independent node. examplenodes also starts local nodes when none are given.
	nodes, err := examplenodes.FromArgs(ctx, "quickstart", args, 3)
	if err != nil {
		return err
	}
	defer nodes.Close()
	fmt.Fprintln(stdout, "nodes:", nodes)

	locks, err := redlock.New(nodes.Clients)
	if err != nil {
		return err
	}
	defer locks.Close() // stops background work; the redis clients stay ours

	const key, ttl = "quickstart:invoice-42", 10 * time.Second
	l, err := locks.TryLock(ctx, key, ttl) // one attempt; Lock would wait
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	fmt.Fprintf(stdout, "acquired %q (quorum %d of %d nodes): token=%d valid for %v (until %s)\n",
		l.Key(), locks.Quorum(), locks.Nodes(), l.Token(), l.TTL().Round(time.Millisecond),
		l.Until().Format("15:04:05.000"))

	// Anyone else is refused while we hold it. Compare with errors.Is: the
	// error may also carry node errors or ctx's error.
	_, err = locks.TryLock(ctx, key, ttl)
	fmt.Fprintf(stdout, "second TryLock: %v (errors.Is ErrNotAcquired: %t)\n", err, errors.Is(err, redlock.ErrNotAcquired))
	if !errors.Is(err, redlock.ErrNotAcquired) {
		return fmt.Errorf("a second holder was not refused: %v", err)
	}

	// The work goes here. The lock can still be lost before Unlock (a long
	// pause outlasting the validity): pass l.Token() with every write so the
	// storage can refuse a stale holder — see examples/fenced-storage.
	fmt.Fprintf(stdout, "working under token=%d (send it with every write)\n", l.Token())

	// Unlock is compare-and-delete on each node: it never removes a key that
	// another holder set after ours expired. ErrLockLost says ours was gone.
	if err := l.Unlock(ctx); err != nil {
		return fmt.Errorf("release: %w", err)
	}
	fmt.Fprintln(stdout, "released")
	return nil
}
