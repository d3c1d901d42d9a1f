// Package outcome names how an acquisition call ended, in the one
// vocabulary that the metrics and tracing packages share.
package outcome

import (
	"context"
	"errors"

	"github.com/fencedlock/fencedlock/redlock"
)

// The outcomes of an acquisition call.
const (
	Acquired         = "acquired"          // the call returned a hold
	Refused          = "refused"           // the key is held, or the retry strategy gave up
	NodeError        = "node_error"        // failed with node errors (among them, too few nodes granted)
	Canceled         = "canceled"          // the caller's ctx was cancelled
	DeadlineExceeded = "deadline_exceeded" // the caller's ctx deadline passed
)

// All lists every outcome.
var All = []string{Acquired, Refused, NodeError, Canceled, DeadlineExceeded}

// Of is the outcome of an acquisition call that returned err: the
// caller's ctx's end first, then node errors, else a refusal. A node's
// own timeout wraps context.DeadlineExceeded inside its *NodeError: that
// is a node error, not the caller's deadline.
func Of(err error) string {
	var ne *redlock.NodeError
	switch {
	case err == nil:
		return Acquired
	case outside(err, context.Canceled):
		return Canceled
	case outside(err, context.DeadlineExceeded):
		return DeadlineExceeded
	case errors.As(err, &ne):
		return NodeError
	}
	return Refused
}

// outside reports whether err's tree holds target outside every
// *NodeError.
func outside(err, target error) bool {
	if err == target {
		return true
	}
	if _, ok := err.(*redlock.NodeError); ok {
		return false
	}
	switch u := err.(type) {
	case interface{ Unwrap() []error }:
		for _, e := range u.Unwrap() {
			if outside(e, target) {
				return true
			}
		}
	case interface{ Unwrap() error }:
		if e := u.Unwrap(); e != nil {
			return outside(e, target)
		}
	}
	return false
}
