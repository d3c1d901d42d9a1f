package redlock

import (
	"errors"
	"fmt"
)

var (
	// ErrNotAcquired means the lock was not acquired: another holder has it,
	// too few nodes answered, or ctx ended while waiting (then joined with
	// ctx.Err()). Every failure to acquire has it in its chain.
	ErrNotAcquired = errors.New("redlock: lock not acquired")
	// ErrLockLost means an Extend or Unlock found the hold on fewer than a
	// quorum of nodes: it expired, or was taken over.
	ErrLockLost = errors.New("redlock: lock lost")
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
