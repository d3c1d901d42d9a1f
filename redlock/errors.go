package redlock

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrNotAcquired means the lock was not acquired: another holder has it,
	// too few nodes answered (joined with their [*NodeError]s), or ctx ended
	// while waiting (joined with ctx.Err() and the node errors of the last
	// attempt). Every failure to acquire has it in its chain; bad input does
	// not ([ErrInvalidArgument] alone), so that treating ErrNotAcquired as
	// "someone else has it" never hides a bug.
	ErrNotAcquired = errors.New("redlock: lock not acquired")
	// ErrLockLost means an Extend or Unlock found the hold on fewer than a
	// quorum of nodes: it expired, or was taken over.
	ErrLockLost = errors.New("redlock: lock lost")
	// ErrOutcomeUnknown means an Extend or Unlock was sent but its outcome
	// is not known: ctx ended, or nodes failed, before a quorum answered.
	// The calls may still land; the hold is gone by its TTL in any case.
	// It is joined with ctx.Err() or the nodes' errors.
	ErrOutcomeUnknown = errors.New("redlock: outcome unknown")
	// ErrInvalidArgument wraps the reason for bad input to New, TryLock,
	// Lock, Do or Extend. It is returned before any I/O.
	ErrInvalidArgument = errors.New("redlock: invalid argument")
	// ErrTokenExhausted means a node's fence counter reached the int64
	// maximum (about 9.2e18 holds): no larger token can be issued there, so
	// the acquisition fails, joined with [ErrNotAcquired], before writing
	// anything; Lock and Do do not retry it. Tokens never wrap or repeat.
	ErrTokenExhausted = errors.New("redlock: fence counter exhausted")
)

// NodeError is the failure of one node: refused connection, timeout,
// NOSCRIPT, READONLY, LOADING and the like. Node is the index in the slice
// given to New. A call that got no reply by its node timeout, or that was
// not sent since the node is marked down, also carries the last transport
// error seen for that node since it last answered (a refused dial that
// go-redis was still retrying), in its message and in its chain for
// errors.Is and errors.As.
type NodeError struct {
	Node int
	Addr string
	Err  error
}

func (e *NodeError) Error() string {
	return fmt.Sprintf("redlock: node %d (%s): %v", e.Node, e.Addr, e.Err)
}

func (e *NodeError) Unwrap() error { return e.Err }

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
}

// join is errors.Join on one line: the messages separated by "; ", so that
// a logged error stays one log line. nil errors are left out; with none
// left it is nil. errors.Is and errors.As see every error joined.
func join(errs ...error) error {
	n := 0
	for _, err := range errs {
		if err != nil {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	j := &joined{errs: make([]error, 0, n)}
	for _, err := range errs {
		if err != nil {
			j.errs = append(j.errs, err)
		}
	}
	return j
}

type joined struct{ errs []error }

func (j *joined) Error() string {
	msgs := make([]string, len(j.errs))
	for i, err := range j.errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

func (j *joined) Unwrap() []error { return j.errs }

// nodeErrors are the *NodeErrors in err's tree, each once.
func nodeErrors(err error) []error {
	var out []error
	var walk func(error)
	walk = func(e error) {
		if ne, ok := e.(*NodeError); ok {
			for _, o := range out {
				if o == ne {
					return
				}
			}
			out = append(out, ne)
			return
		}
		switch u := e.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				walk(x)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}
