// Package history is the data model and the file format of what the clients
// of a lock did. A History is a plain list of operations (acquire, extend,
// release, fenced write, lost signal, probe of a node) and fault intervals,
// every one stamped with invoke and complete times on one clock; package
// recorder builds one from many goroutines at once, and package checker
// judges it. ReadJSONL and WriteJSONL read and write the JSON Lines format
// of docs/history-format.md; ReadJSONL refuses, naming the line, any file
// that breaks the format, and returns only histories that pass Validate.
package history

import (
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
)

// Kind is the kind of an operation.
type Kind string

// The kinds of operations.
const (
	// KindAcquire is a Lock call: invoke when it was called, complete when it
	// returned; on success Token, Value and ValidUntil are set.
	KindAcquire Kind = "acquire"
	// KindExtend is an Extend call of the hold Hold; on success ValidUntil
	// is the new end of validity.
	KindExtend Kind = "extend"
	// KindRelease is an Unlock call of the hold Hold.
	KindRelease Kind = "release"
	// KindWrite is a fenced write of Entry to Resource with the token of Hold.
	KindWrite Kind = "write"
	// KindLost is the moment the hold's Done() channel was seen closed
	// (Invoke == Complete).
	KindLost Kind = "lost"
	// KindFault is a fault interval: Invoke is when it started, Complete when
	// it ended (node restarted, resumed, healed, skew removed). A fault that
	// never ended lasts until the end of the history.
	KindFault Kind = "fault"
	// KindProbe is a read of one lock node's state for Key, made by the
	// harness beside the lock (see nodes.go): Node is the node, Value the
	// value the key had there ("" when there was no key) and PTTL its time
	// to live. A probe that names a hold (Hold) was made for that hold;
	// one that names none, after Client's acquire failed. Outcome Failed:
	// the node did not answer, and the probe proves nothing.
	KindProbe Kind = "probe"
)

// Outcome is how an operation completed. The empty Outcome means the
// operation never completed.
type Outcome string

// The outcomes.
const (
	Pending  Outcome = ""         // never completed
	OK       Outcome = "ok"       // acquired, extended, released, write accepted, fault ended, lost seen
	Failed   Outcome = "failed"   // acquire failed; extend, release or write failed with an error (Err); a fault not injected or not undone
	LockLost Outcome = "lost"     // extend, release: the hold was no longer on a quorum (ErrLockLost)
	Rejected Outcome = "rejected" // write: the store refused the token as stale
)

// Op is one operation or fault of a history. Which fields are set depends on
// Kind; the others are zero. Times are offsets from the start of the run on
// the history's one monotonic clock.
type Op struct {
	ID       int           `json:"id"` // 1-based position in History.Ops
	Kind     Kind          `json:"kind"`
	Client   int           `json:"client"`
	Key      string        `json:"key,omitempty"` // lock key (acquire, release, write, lost)
	Invoke   time.Duration `json:"invoke_ns"`
	Complete time.Duration `json:"complete_ns"`
	Outcome  Outcome       `json:"outcome,omitempty"`

	// Hold is the ID of the successful acquire that an extend, release, write
	// or lost signal belongs to.
	Hold  int    `json:"hold,omitempty"`
	Token uint64 `json:"token,omitempty"`
	Value string `json:"value,omitempty"`
	// ValidUntil is, for a successful acquire or extend, the end of validity
	// the client computed (Lock.Until), on the history clock. Zero means
	// none: the client relies on the lost signal alone.
	ValidUntil time.Duration `json:"valid_until_ns,omitempty"`
	// Granted is, for a successful acquire, the nodes (indexes) whose grants
	// counted toward the hold and its token; for a successful extend, the
	// nodes that extended it. Nil means not recorded: the checker then
	// blames faults by time and key alone (see blame.go).
	Granted []int `json:"granted,omitempty"`
	// Reacquired is, for an extend, the nodes (indexes, one entry per
	// re-create: a node may be listed twice) on which the hold's key was
	// re-created (fencedlock's redlock.WithReacquireOnExtend) that the
	// client had seen by the time the op was recorded and had not recorded
	// on an earlier extend: a re-create that answers after its Extend
	// returned is recorded on the hold's next extend. Nil: none seen, or
	// the lock re-creates nothing.
	Reacquired []int `json:"reacquired,omitempty"`

	Resource string `json:"resource,omitempty"` // write: the store resource
	Entry    string `json:"entry,omitempty"`    // write: unique id of what was written
	Seq      uint64 `json:"seq,omitempty"`      // write accepted: the store's own order (1, 2, ...); 0 = not given

	Fault fault.Kind `json:"fault,omitempty"` // node faults name a node in Node; client faults (Kind.ClientSide) a client in Client
	Node  int        `json:"node,omitempty"`

	Err string `json:"err,omitempty"`

	// PTTL is, for a probe that found a key, its time to live as the node
	// said (PTTL); zero when the node gave none.
	PTTL time.Duration `json:"pttl_ns,omitempty"`
	// Own is, for a probe, that the value found is one Client's lock made
	// for a call that ended before the probe (see nodes.go): a grant the
	// client no longer has a right to.
	Own bool `json:"own,omitempty"`
}

// History is what a run did. It is plain data, kept in files in the JSON
// Lines format of WriteJSONL and ReadJSONL, so that real recorded histories
// can be kept as test files and checked later.
type History struct {
	// Nodes is the number of lock nodes; a quorum is Nodes/2+1.
	Nodes int  `json:"nodes"`
	Ops   []Op `json:"ops"`
	// Final is the store's contents at the end of the run: for each resource,
	// every entry the store holds, in the store's order (an append log). Nil
	// means not recorded, and lost writes are then not checked.
	Final map[string][]string `json:"final,omitempty"`
	// End is when the history was taken; open faults and holds last until then.
	End time.Duration `json:"end_ns"`
	// ClockError bounds how far the timestamps of two ops may be off from
	// each other (ops stamped by processes whose clocks were merged): the
	// checker takes two times on different ops as ordered only when they
	// differ by more than it. Zero: one clock stamped every op.
	ClockError time.Duration `json:"clock_error_ns,omitempty"`
	// Version is the format version the history was read under: 1 when
	// ReadJSONL read it by the version 1 rules (a lost extend does not end
	// its hold), and 0 (the current rules, FormatVersion) otherwise.
	Version int `json:"version,omitempty"`
	// Clients names the clients by index when they were recorded under names
	// (package recorder, or a JSON Lines history that names them); nil means
	// clients are known by their index alone.
	Clients []string `json:"clients,omitempty"`
}
