package checker

import (
	"cmp"
	"fmt"
	"time"

	"github.com/fencedlock/fencedlock/chaos/fault"
	"github.com/fencedlock/fencedlock/chaos/history"
)

// Span is one hold as the checker sees it: the interval during which the
// client believed it held the lock, and acted on that belief.
//
// It starts when the acquire returned (Complete: before that the client does
// not know it holds the lock, so it cannot act as holder). It ends at the
// earliest of: the release's invocation, the lost signal, the validity
// end the client computed (as raised by successful extensions; holds recorded
// with no validity end have none), and the end an extend that returned
// lost sets: the validity end as it stood when that extend was invoked, or,
// with none, the extend's return, unless a successful extend returned
// after it (or at the same moment): the lock then told the client last that
// it holds the key. From each of those moments on the client
// knows, or should know, that it no longer holds the lock: validity is all a
// holder can trust, and without one it learned of the loss when the extend
// returned. (A version 1 history, Version 1, keeps its old rule: a lost
// extend does not end the hold.) A write issued under the hold
// after that moment extends the span to the write's invocation and marks it
// Overrun: the client acted as holder anyway, as a holder paused between its
// check and its write does. A span with no end lasts until the history's End.
type Span struct {
	Acquire int // op ID of the acquire
	Client  int
	Key     string
	Token   uint64
	Invoke  time.Duration // when the acquire was called
	Start   time.Duration
	End     time.Duration
	EndedBy string // "release", "lost", "lost-extend", "validity", "write" (Overrun) or "run-end"
	Overrun bool
	// Believed is when the client should have stopped acting as holder: End,
	// unless a write overran it.
	Believed time.Duration
}

// FaultSpan is one fault interval.
type FaultSpan struct {
	Op     int // op ID of the fault
	Kind   fault.Kind
	Node   int // for node faults
	Client int // for client faults (Kind.ClientSide())
	Start  time.Duration
	End    time.Duration // the history's End when the fault never ended
	Open   bool          // the fault never ended
	// Err is why the fault could not be injected or undone; "" when it
	// was. A failed fault may have half happened (a node killed and never
	// started again): it is still blamed and still counts a node down.
	Err string
}

// Target names what the fault hit: "node 2", or "client 3" for a client
// fault.
func (f FaultSpan) Target() string {
	if f.Kind.ClientSide() {
		return fmt.Sprintf("client %d", f.Client)
	}
	return fmt.Sprintf("node %d", f.Node)
}

// Spans returns the holds of h in order of their acquire, or an error when an
// op names a hold that is not a successful acquire of the same key, or op IDs
// are not their 1-based positions.
func Spans(h history.History) ([]Span, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	idx := make(map[int]int) // acquire op ID -> index in spans
	var spans []Span
	var valid []time.Duration // validity end, raised by extensions; 0 = none
	for _, op := range h.Ops {
		if op.Kind != history.KindAcquire || op.Outcome != history.OK {
			continue
		}
		idx[op.ID] = len(spans)
		spans = append(spans, Span{Acquire: op.ID, Client: op.Client, Key: op.Key, Token: op.Token,
			Invoke: op.Invoke, Start: op.Complete, End: h.End, EndedBy: "run-end"})
		valid = append(valid, op.ValidUntil)
	}
	lastWrite := make([]time.Duration, len(spans))
	renewed := make([]time.Duration, len(spans)) // the last return of a successful extend
	var losses []lostExtend
	for _, op := range h.Ops {
		if op.Hold == 0 {
			continue
		}
		i := idx[op.Hold]
		switch s := &spans[i]; op.Kind {
		case history.KindExtend:
			if op.Outcome == history.OK {
				renewed[i] = max(renewed[i], op.Complete)
				if valid[i] != 0 {
					valid[i] = max(valid[i], op.ValidUntil)
				}
			}
			if op.Outcome == history.LockLost && h.Version != 1 {
				losses = append(losses, lostExtend{span: i, end: cmp.Or(valid[i], op.Complete), heard: op.Complete})
			}
		case history.KindRelease, history.KindLost:
			if op.Invoke < s.End {
				s.End, s.EndedBy = op.Invoke, string(op.Kind)
			}
		case history.KindWrite:
			lastWrite[i] = max(lastWrite[i], op.Invoke)
		}
	}
	// A successful extend that returned after a lost one (or with it) told
	// the client last that it holds the key: that loss no longer ends the
	// hold, or a lock that extended a hold it had called lost would pass.
	for _, l := range losses {
		if s := &spans[l.span]; l.heard > renewed[l.span] && l.end < s.End {
			s.End, s.EndedBy = l.end, "lost-extend"
		}
	}
	for i := range spans {
		s := &spans[i]
		if valid[i] != 0 && valid[i] < s.End {
			s.End, s.EndedBy = valid[i], "validity"
		}
		s.Believed = s.End
		if lastWrite[i] > s.End {
			s.End, s.EndedBy, s.Overrun = lastWrite[i], "write", true
		}
	}
	return spans, nil
}

// lostExtend is an extend of spans[span] that returned lost: the end it
// sets, and when the client heard of it.
type lostExtend struct {
	span       int
	end, heard time.Duration
}

// Faults returns the fault intervals of h, failed ones included, in the
// order they were recorded.
func Faults(h history.History) []FaultSpan {
	var fs []FaultSpan
	for _, op := range h.Ops {
		if op.Kind != history.KindFault {
			continue
		}
		f := FaultSpan{Op: op.ID, Kind: op.Fault, Node: op.Node, Client: op.Client,
			Start: op.Invoke, End: op.Complete}
		switch op.Outcome {
		case history.Pending:
			f.End, f.Open = max(h.End, op.Invoke), true
		case history.Failed:
			f.Err = cmp.Or(op.Err, "failed")
		}
		fs = append(fs, f)
	}
	return fs
}
