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

// Of is the outcome of an acquisition call that returned err: the ctx's end
// first, then node errors, else a refusal.
func Of(err error) string {
	var ne *redlock.NodeError
	switch {
	case err == nil:
		return Acquired
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	case errors.As(err, &ne):
		return NodeError
	}
	return Refused
}
