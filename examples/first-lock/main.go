// Command first-lock takes a lock on a majority of three Redis nodes, writes
// under it with its fencing token, and releases it.
//
//	go run ./examples/first-lock --nodes h1:6379,h2:6379,h3:6379
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/fencing"
	"github.com/fencedlock/fencedlock/redlock"
)

func main() {
	addrs := flag.String("nodes", "127.0.0.1:6379,127.0.0.1:6380,127.0.0.1:6381", "independent Redis primaries")
	flag.Parse()
	store := fencing.NewMemory() // stands in for your storage: it must refuse stale tokens
	if err := run(context.Background(), strings.Split(*addrs, ","), store, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, addrs []string, store *fencing.Memory, out io.Writer) error {
	const ttl = 10 * time.Second
	const nodeTimeout = ttl / 20 // redlock's default for this TTL: ttl/20, within 5ms–500ms

	var nodes []redis.UniversalClient
	for _, addr := range addrs {
		rdb := redis.NewClient(&redis.Options{
			Addr:                  addr,
			DialTimeout:           nodeTimeout,
			ContextTimeoutEnabled: true, // the lock's per-node deadlines also free connections
			MaxRetries:            -1,   // a failed call is a failed node: the quorum decides, not a retry
		})
		defer rdb.Close()
		// Connect before the first lock, so that its calls do not pay for the
		// dial inside the node timeout. A node that is down is the lock's to count.
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		_ = rdb.Ping(pctx).Err()
		cancel()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes, redlock.WithNodeTimeout(nodeTimeout))
	if err != nil {
		return err // ErrInvalidArgument: no nodes, or one given twice
	}
	defer locks.Close() // stops background work; the redis clients stay ours

	l, err := locks.TryLock(ctx, "invoice:42", ttl, redlock.AutoExtend())
	if errors.Is(err, redlock.ErrNotAcquired) {
		// Held by someone else, or too few nodes answered (the *redlock.NodeError
		// values in err say which).
		fmt.Fprintln(out, "invoice:42 is busy:", err)
		return nil
	}
	if err != nil {
		return err // ErrInvalidArgument: a bug, never a refusal
	}
	fmt.Fprintf(out, "holding invoice:42 with token %d until %s\n", l.Token(), l.Until().Format(time.RFC3339Nano))

	for i := range 3 {
		select {
		case <-l.Done(): // a quorum says the lock is gone, or its validity ran out
			return fmt.Errorf("invoice:42: %w", redlock.ErrLockLost)
		default:
		}
		// Every write carries the token: a holder that lost the lock while
		// paused (GC, VM freeze) is refused by the storage, not by the lock.
		err := store.Append(ctx, "invoice:42", l.Token(), fmt.Sprintf("line %d", i))
		if errors.Is(err, fencing.ErrStaleToken) {
			return fmt.Errorf("a later holder wrote first: %w", err)
		}
		if err != nil {
			return err
		}
	}

	// Unlock is compare-and-delete on each node. ErrLockLost: the hold had
	// expired or been taken over; the writes above were fenced all the same.
	if err := l.Unlock(ctx); errors.Is(err, redlock.ErrLockLost) {
		fmt.Fprintln(out, "the lock was lost before Unlock")
	} else if err != nil {
		return err // ErrOutcomeUnknown: the key goes by its TTL
	}
	fmt.Fprintln(out, "released; the store has", len(store.Log("invoice:42")), "entries")
	return nil
}
