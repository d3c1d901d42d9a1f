// Package redlock is a distributed lock on N independent Redis nodes (the
// Redlock algorithm) whose holds carry fencing tokens that stay strictly
// monotonic through node failures: if an acquisition B starts after an
// acquisition A of the same key returned, B's token is larger than A's — with
// no assumption about clocks, pauses or network delays. A hold needs a
// majority of nodes (N/2+1) to grant it and is valid until [Lock.Until], on
// the client's clock; Until already has the allowance for clock drift taken
// off (see [WithDriftFactor]). The argument for each guarantee, and what it
// rests on, is in docs/protocol.md.
//
// What rests on what: mutual exclusion rests on timing (bounded clock drift
// between nodes, holders that stop using the lock by Until); the token's
// monotonicity rests only on each node's fence counter surviving, which is
// why strict fencing wants nodes with appendonly yes and appendfsync always.
// A node that comes back empty is tolerated only if it stays down until
// the acquisitions in flight have decided and the other nodes already hold
// the highest counter on a quorum; the next acquisitions that reach it heal
// its counter. Storage that checks tokens (package fencing)
// turns the token into safety even when the timing assumptions break.
//
// Start with [New], then [Client.TryLock] (one attempt), [Client.Lock]
// (waits) or [Client.Do] (runs a function under the lock, extended
// automatically); [Lock.Lease] gives each call made under a hold a
// deadline that ends before the hold's validity. Failures are [ErrNotAcquired], [ErrLockLost] and
// [ErrInvalidArgument], with [*NodeError] for what a node said.
//
// Waiters are served in the order they began to wait, across processes:
// each node keeps a key's waiting set and grants only to its first waiter
// (see [Client.Lock]; Claim 6 of docs/protocol.md says exactly when).
//
// A Client is safe for concurrent use, and so is a Lock.
package redlock
