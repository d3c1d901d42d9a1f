package redlockprom_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/redlockprom"
)

func TestOutcome(t *testing.T) {
	ne := &redlock.NodeError{Node: 1, Addr: "127.0.0.1:1", Err: errors.New("refused")}
	for _, tt := range []struct {
		err  error
		want string
	}{
		{nil, redlockprom.Acquired},
		{redlock.ErrNotAcquired, redlockprom.Refused},
		{errors.Join(redlock.ErrNotAcquired, ne), redlockprom.NodeError},
		{errors.Join(redlock.ErrNotAcquired, context.Canceled, ne), redlockprom.Canceled},
		{errors.Join(redlock.ErrNotAcquired, context.DeadlineExceeded), redlockprom.DeadlineExceeded},
		{errors.Join(redlock.ErrNotAcquired, &redlock.NodeError{Node: 2, Err: fmt.Errorf("dial: %w", context.DeadlineExceeded)}), redlockprom.NodeError},
		{fmt.Errorf("wrapped: %w", errors.Join(redlock.ErrNotAcquired, context.Canceled)), redlockprom.Canceled},
	} {
		t.Run(fmt.Sprint(tt.err), func(t *testing.T) {
			if got := redlockprom.Outcome(tt.err); got != tt.want {
				t.Errorf("Outcome(%v) = %q, want %q", tt.err, got, tt.want)
			}
		})
	}
}

func TestNewTwiceOnOneRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := redlockprom.New(reg); err != nil {
		t.Fatal(err)
	}
	var already prometheus.AlreadyRegisteredError
	if _, err := redlockprom.New(reg); !errors.As(err, &already) {
		t.Errorf("second New on one registry: %v, want an AlreadyRegisteredError", err)
	}
	if _, err := redlockprom.New(nil); err == nil {
		t.Error("New(nil): no error")
	}
}
