// Package protomodel is an exhaustive model check of the lock protocol of
// package redlock: nodes, clients and every message between them, explored
// breadth first up to a bound, with every property checked after every
// step. docs/protocol.md states the protocol, the claims and their proofs;
// this package is the evidence a reader can rerun:
//
//	go test -race -run Model ./internal/protomodel            # the default bounds
//	go test -race -run Model ./internal/protomodel -model.large # larger ones
//
// What is modelled, transcribed from redlock (acquire.go, attempt.go,
// tally.go, lock.go, the Lua scripts in scripts/):
//
//   - a node: the lock key (which hold's value, if any), the fence counter
//     and the key's waiting set (one entry per client, ordered by wait
//     start); the scripts acquire (grant only to a caller no other entry
//     is older than, leaving its entry; a refusal enters or refreshes it),
//     raise, heal and release (a step back's leaves the set alone; an
//     Unlock's, where it deletes, ends the client's entry if it is still the
//     hold's), each one atomic step;
//   - a client: attempts that ask every node, decide at a quorum or when
//     stuck, take the fast path or raise the lagging grants under ownership,
//     heal after a success, release after a failure or an unlock, settle
//     late replies, re-ask after a split vote, time out, give up; a try
//     that begins a wait, or (Lock trying again) continues its client's;
//   - Extend (extend.go): a hold within its validity extends, one
//     extension at a time; the node script refreshes its key, or with the
//     option WithReacquireOnExtend re-creates a vanished one (SET NX,
//     counter raised to the token); success at a quorum begins a new
//     validity epoch, a quorum of refusals loses the hold (its Unlock
//     follows), a deadline leaves the outcome unknown; with the option, the
//     Unlock of a hold that extended releases on every node;
//   - the network: each call and each reply is a message delivered at any
//     later step, except that a client's calls for a key reach a node in
//     order (redlock's per-key worker queue); a lost message is one never
//     delivered;
//   - faults: a node crashes, and comes back empty (amnesia) under the
//     assumption of docs/protocol.md; a validity runs out on the client's
//     clock; a key expires (with exact clocks, only after the validity of
//     the hold's epoch that set or refreshed it; without a timing
//     assumption, at any moment); a waiting-set entry's lease runs out; an
//     empty restart drops the set; rolling restarts (Config.Rolling), one
//     node at a time, back empty under a valid hold's key that the hold
//     keeps on a quorum of the others.
//
// Properties: fencing order (B started after A returned ⇒ B's token >
// A's), unique tokens, mutual exclusion within validity (with exact
// clocks), no grant left behind (a re-created key too), fairness (no Lock
// returned while an older client waits whose entry was on a quorum when
// the younger began waiting, unless a node of it lost the entry to a lease
// or an empty restart since: waiting.go). Variants plant the known bugs
// and drop the assumptions one at a time; the tests show each is caught
// with a shortest trace.
//
// The search is one goroutine with no shared memory, so its functions are
// marked //go:norace: under `go test -race` the detector has nothing to
// find in them, and instrumenting them made the search about seven times
// slower.
package protomodel
