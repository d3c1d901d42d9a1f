package redlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlocktest"
)

func ExampleClient_TryLock() {
	// Your independent Redis servers (here: those the tests started).
	var nodes []redis.UniversalClient
	for _, addr := range redisAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, err := redlock.New(nodes)
	if err != nil {
		panic(err)
	}
	defer locks.Close()
	ctx := context.Background()

	l, err := locks.TryLock(ctx, "invoice:42", 10*time.Second)
	if err != nil {
		panic(err)
	}
	fmt.Println("token > 0:", l.Token() > 0)

	_, err = locks.TryLock(ctx, "invoice:42", 10*time.Second)
	fmt.Println("second TryLock refused:", errors.Is(err, redlock.ErrNotAcquired))

	fmt.Println("unlock:", l.Unlock(ctx))
	// Output:
	// token > 0: true
	// second TryLock refused: true
	// unlock: <nil>
}

func ExampleClient_Lock() {
	// Your independent Redis servers (here: those the tests started).
	var nodes []redis.UniversalClient
	for _, addr := range redisAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, _ := redlock.New(nodes)
	defer locks.Close()
	ctx := context.Background()

	first, _ := locks.TryLock(ctx, "report", time.Minute)
	got := make(chan *redlock.Lock)
	go func() {
		// Waits: woken by the release, not by polling.
		l, err := locks.Lock(ctx, "report", time.Minute)
		if err != nil {
			panic(err)
		}
		got <- l
	}()
	_ = first.Unlock(ctx)
	second := <-got
	fmt.Println("second token is larger:", second.Token() > first.Token())
	_ = second.Unlock(ctx)

	// With a deadline, a busy key ends in ErrNotAcquired joined with ctx's error.
	held, _ := locks.TryLock(ctx, "report", time.Minute)
	dctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	_, err := locks.Lock(dctx, "report", time.Minute)
	fmt.Println(errors.Is(err, redlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded))
	_ = held.Unlock(ctx)
	// Output:
	// second token is larger: true
	// true true
}

func ExampleClient_Do() {
	// Your independent Redis servers (here: those the tests started).
	var nodes []redis.UniversalClient
	for _, addr := range redisAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, _ := redlock.New(nodes)
	defer locks.Close()

	err := locks.Do(context.Background(), "nightly-billing", 30*time.Second,
		func(ctx context.Context, l *redlock.Lock) error {
			// ctx is cancelled the moment the lock is lost; pass l.Token()
			// with every write so the storage can refuse a stale holder.
			fmt.Println("running under a token:", l.Token() > 0)
			return nil
		})
	fmt.Println("err:", err)
	// Output:
	// running under a token: true
	// err: <nil>
}

func ExampleLock_Done() {
	// Your independent Redis servers (here: those the tests started).
	var nodes []redis.UniversalClient
	for _, addr := range redisAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, _ := redlock.New(nodes)
	defer locks.Close()
	ctx := context.Background()

	// AutoExtend keeps the hold alive; Done closes if a quorum of nodes
	// says it is gone, or its validity runs out.
	l, _ := locks.TryLock(ctx, "leader", 3*time.Second, redlock.AutoExtend())
	select {
	case <-l.Done():
		fmt.Println("lost")
	default:
		fmt.Println("holding")
	}
	_ = l.Unlock(ctx)
	<-l.Done()
	fmt.Println("done after unlock")
	// Output:
	// holding
	// done after unlock
}

func ExampleLock_Lease() {
	// Your independent Redis servers (here: those the tests started).
	var nodes []redis.UniversalClient
	for _, addr := range redisAddrs {
		rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	locks, _ := redlock.New(nodes)
	defer locks.Close()
	ctx := context.Background()

	err := locks.Do(ctx, "export", 30*time.Second, func(ctx context.Context, l *redlock.Lock) error {
		// One lease per call: its deadline is the validity left now less a
		// margin for the callee's last write; a later extension does not move it.
		call, cancel := l.Lease(ctx, 2*time.Second)
		defer cancel()
		deadline, _ := call.Deadline()
		fmt.Println("the call must end before the hold:", time.Until(deadline) < l.TTL())
		// A callee far down finds the hold in the ctx.
		held, _ := redlock.LockFromContext(call)
		fmt.Println("same token:", held.Token() == l.Token())

		_ = l.Unlock(ctx) // the hold ends: so does every lease of it
		fmt.Println("lease ended:", context.Cause(call))
		return nil
	})
	fmt.Println("Do:", err)
	// Output:
	// the call must end before the hold: true
	// same token: true
	// lease ended: context canceled
	// Do: <nil>
}

// Nodes without persistence that restart one at a time: an extension puts
// the hold's key back where a node lost it.
func ExampleWithReacquireOnExtend() {
	ctx := context.Background()
	nodes, err := redlocktest.New(ctx, 3) // three redis-server processes for this example
	if err != nil {
		panic(err)
	}
	defer nodes.Close()
	locks, err := redlock.New(nodes.Clients(), redlock.WithReacquireOnExtend())
	if err != nil {
		panic(err)
	}
	defer locks.Close()

	l, err := locks.TryLock(ctx, "migration", time.Minute)
	if err != nil {
		panic(err)
	}
	// The nodes lose their data, as restarts without persistence do (here
	// by FLUSHALL, which keeps their connections; in production, restart
	// one node at a time, between extensions).
	for _, n := range nodes {
		n.Client().FlushAll(ctx)
	}
	fmt.Println("extend:", l.Extend(ctx, time.Minute))
	fmt.Println("re-created on a node that lost it:", len(l.Reacquired()) > 0)
	fmt.Println("unlock:", l.Unlock(ctx))
	// Output:
	// extend: <nil>
	// re-created on a node that lost it: true
	// unlock: <nil>
}
