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
package fencing
