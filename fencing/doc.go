// Package fencing is the storage side of fencing tokens. A Guard admits an
// operation on a resource only if its token is at least the highest token
// already admitted for that resource, records the new high-water mark in the
// same atomic step, and refuses the operation with ErrStaleToken otherwise; so
// a lock holder that was paused or cut off past the end of its lock cannot undo
// the work of a newer holder. Tokens are compared per resource, never across
// resources; equal tokens are admitted (a holder may write several times), and
// a token must be > 0, as package redlock issues them. The guard is only as good
// as the atomicity and durability of the storage behind it: the data write must
// happen in the same atomic step as the check (Memory.Append, one Lua script in
// Redis, the caller's transaction in SQL) or the check protects nothing, and a
// storage that forgets its high-water marks (a Redis that restarts empty) will
// admit stale tokens again.
//
// # Failures after admission, and retried calls
//
// What each guard does when something fails once a token was admitted, and
// when the same call runs twice:
//
//   - [Memory]: the check, the mark and the append happen under one mutex, and
//     nothing in between can fail. A call made again is a new call: Append
//     appends a second entry.
//   - [Redis]: one script checks everything that can fail before its first
//     write, so an error other than a lost connection means nothing changed. A
//     lost connection leaves the outcome unknown (all or nothing). A retry of
//     the same call by the client (go-redis retries after a lost reply by
//     default) is recognised by the call's op id within the retry window and
//     returns the first run's outcome, never applying it twice; a call the
//     caller makes again is a new call.
//   - [SQL]: AdmitTx raises the mark inside the caller's transaction, so a
//     failure before commit rolls the admission back with the data. A commit
//     whose reply was lost leaves the outcome unknown; running the transaction
//     again is a new call (database/sql itself re-sends only what never reached
//     the server). Admit is a transaction of its own: a write after it is not
//     covered.
//   - [Middleware]: admission is its own step, committed before the handler
//     runs. If the handler fails afterwards, the token stays raised although
//     nothing was written, and older tokens are refused from then on. A retried
//     request with the same token is admitted again and runs the handler again.
//
// Package fencing/fencinggrpc does for gRPC what [Middleware] does for HTTP,
// in a package of its own so that only its users link gRPC.
//
// # Observing decisions
//
// [WithObserver] gives any guard, or the Middleware, a [GuardObserver] that
// hears each admission and each stale-token rejection, for metrics
// (package redlock/redlockprom implements one).
package fencing
