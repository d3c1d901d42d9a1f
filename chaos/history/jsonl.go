package history

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
)

// The JSON Lines format of a history: one JSON object per line, each an
// operation, a fault, or a line about the run. It is what WriteJSONL writes,
// ReadJSONL reads, package recorder produces from any program's lock calls,
// and `fencedlock check` checks. docs/history-format.md is the reference;
// in short, every line has a "kind":
//
//	acquire, extend, release, write, lost   an operation of a client on a lock key
//	fault                                   a fault interval, on a node or a client
//	probe                                   a read of one lock node's state for a key
//	store                                   the final contents of a store resource
//	run                                     the format version, the node count, the
//	                                        clocks' error, the start and the end
//
// Operations carry "client" (a number or a name), "key", "invoke_ns" and
// "complete_ns" (nanoseconds on one clock shared by every line, from any
// origin), "outcome" (ok, failed, lost, rejected; absent if the call never
// returned) and "token". An extend, release, write or lost names its hold by
// client, key and token: the latest successful acquire of that key by that
// client with that token, returned before it. Lines may come in any order.

// FormatVersion is the version of the format that WriteJSONL writes and
// ReadJSONL reads by its current rules; a history without a version is
// version 1 (see docs/history-format.md, Versions).
const FormatVersion = 2

// Line is one line of the format, for programs that write histories
// (package recorder does): encoding/json writes it as the format wants.
// Times are nanoseconds on the history's one clock; nil means absent.
type Line struct {
	Kind       string   `json:"kind"`              // an op Kind, "fault", "store" or "run"
	Version    int      `json:"version,omitempty"` // run: the format version (FormatVersion)
	Client     any      `json:"client,omitempty"`  // an index (int) or a name (string); nil for node faults
	Key        string   `json:"key,omitempty"`
	Invoke     *int64   `json:"invoke_ns,omitempty"`
	Complete   *int64   `json:"complete_ns,omitempty"` // nil when the call never returned
	Outcome    string   `json:"outcome,omitempty"`     // "" when the call never returned
	Token      uint64   `json:"token,omitempty"`
	Value      string   `json:"value,omitempty"`
	ValidUntil *int64   `json:"valid_until_ns,omitempty"`
	Granted    []int    `json:"granted,omitempty"`    // acquire, extend: the nodes whose grants counted
	Reacquired []int    `json:"reacquired,omitempty"` // extend: the nodes where it re-created the key
	Resource   string   `json:"resource,omitempty"`
	Entry      string   `json:"entry,omitempty"`
	Seq        uint64   `json:"seq,omitempty"`
	Fault      string   `json:"fault,omitempty"`
	Node       *int     `json:"node,omitempty"`
	Err        string   `json:"err,omitempty"`
	Entries    []string `json:"entries,omitempty"` // store: written even when empty by WriteJSONL
	Nodes      int      `json:"nodes,omitempty"`
	ClockError *int64   `json:"clock_error_ns,omitempty"` // run: History.ClockError
	Start      *int64   `json:"start_ns,omitempty"`
	End        *int64   `json:"end_ns,omitempty"`
	PTTL       *int64   `json:"pttl_ns,omitempty"` // probe: the key's time to live; nil when no key, or none given
	Own        bool     `json:"own,omitempty"`     // probe: see Op.Own
}

// The kinds of lines beyond the Kinds of operations.
const (
	LineStore = "store" // the final contents of a store resource: Resource, Entries
	LineRun   = "run"   // the format, the node count, the clocks, where the history starts and ends
)

// WriteJSONL writes h in the JSON Lines format: a run line first (version,
// nodes, clock error, start 0, end), then one line per op in the order
// ReadJSONL numbers them (by invocation, acquires first among equals, then
// by ID), then one store line per resource of h.Final, sorted by name.
// ReadJSONL reads it back into an equal History, but for the op IDs of a
// history whose ops were not in that order (faults that package recorder
// records when they end): those come back in that order, renumbered. Files it
// writes are thus canonical: read and written again, they do not change.
// The version written is FormatVersion, but for a history read as version 1
// (h.Version 1): that one is written without a version, so that it keeps
// the meaning it was read with.
func WriteJSONL(w io.Writer, h History) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	zero, end, clockErr := int64(0), int64(h.End), int64(h.ClockError)
	run := Line{Kind: LineRun, Version: FormatVersion, Nodes: h.Nodes, ClockError: &clockErr, Start: &zero, End: &end}
	if h.Version == 1 {
		run.Version = 0
		if h.ClockError == 0 {
			run.ClockError = nil
		}
	}
	if err := enc.Encode(run); err != nil {
		return err
	}
	ops := slices.Clone(h.Ops)
	slices.SortStableFunc(ops, func(a, b Op) int {
		return cmp.Or(cmp.Compare(a.Invoke, b.Invoke), cmp.Compare(rank(a.Kind), rank(b.Kind)))
	})
	for _, op := range ops {
		if err := enc.Encode(h.Line(op)); err != nil {
			return err
		}
	}
	for _, res := range slices.Sorted(maps.Keys(h.Final)) {
		entries := h.Final[res]
		if entries == nil {
			entries = []string{}
		}
		if err := enc.Encode(storeLine{Kind: LineStore, Resource: res, Entries: entries}); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// storeLine is a store line: unlike line, it writes an empty list of entries.
type storeLine struct {
	Kind     string   `json:"kind"`
	Resource string   `json:"resource"`
	Entries  []string `json:"entries"`
}

// Line returns the line that records op in the JSON Lines format, its
// client named as h names it and its times h's offsets: the line WriteJSONL
// writes for op.
func (h History) Line(op Op) Line {
	l := Line{Kind: string(op.Kind), Key: op.Key, Outcome: string(op.Outcome), Token: op.Token, Value: op.Value,
		Resource: op.Resource, Entry: op.Entry, Seq: op.Seq, Err: op.Err}
	inv := int64(op.Invoke)
	l.Invoke = &inv
	if op.Outcome != Pending && op.Kind != KindLost {
		c := int64(op.Complete)
		l.Complete = &c
	}
	if op.ValidUntil != 0 {
		v := int64(op.ValidUntil)
		l.ValidUntil = &v
	}
	l.Granted, l.Reacquired = op.Granted, op.Reacquired
	switch {
	case op.Kind == KindProbe:
		probeLine(h, op, &l)
	case op.Kind == KindFault && !op.Fault.ClientSide():
		n := op.Node
		l.Fault, l.Node = string(op.Fault), &n
	case op.Kind == KindFault:
		l.Fault, l.Client = string(op.Fault), h.clientID(op.Client)
	default:
		l.Client = h.clientID(op.Client)
	}
	return l
}

// clientID is how a line names client c: its name, or its index.
func (h History) clientID(c int) any {
	if c >= 0 && c < len(h.Clients) {
		return h.Clients[c]
	}
	return c
}

// ClientName returns the name of client c: the one the history was recorded
// with, or "client c".
func (h History) ClientName(c int) string {
	if c >= 0 && c < len(h.Clients) {
		return h.Clients[c]
	}
	return "client " + strconv.Itoa(c)
}

// LineError is a line of a JSON Lines history that ReadJSONL could not read.
type LineError struct {
	Line  int    // 1-based
	Field string // the JSON field at fault; "" when the line is not a JSON object
	Err   error
}

func (e *LineError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("history: line %d: %v", e.Line, e.Err)
	}
	return fmt.Sprintf("history: line %d: field %q: %v", e.Line, e.Field, e.Err)
}

func (e *LineError) Unwrap() error { return e.Err }

// Warning is what ReadJSONLWarn let pass in a version 1 history although the
// current format refuses it, or the version itself.
type Warning struct {
	Line  int    // 1-based; 0 for the history as a whole
	Field string // the JSON field at fault, or ""
	Msg   string
}

func (w Warning) String() string {
	switch {
	case w.Line == 0:
		return "history: " + w.Msg
	case w.Field == "":
		return fmt.Sprintf("history: line %d: %s", w.Line, w.Msg)
	}
	return fmt.Sprintf("history: line %d: field %q: %s", w.Line, w.Field, w.Msg)
}
