package fencing_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/fencedlock/fencedlock/fencing"
)

func TestStaleTokenError(t *testing.T) {
	var err error = &fencing.StaleTokenError{Resource: "orders", Token: 3, Highest: 7}
	wrapped := fmt.Errorf("save order: %w", err)

	if !errors.Is(wrapped, fencing.ErrStaleToken) {
		t.Error("errors.Is(wrapped, ErrStaleToken) = false")
	}
	if errors.Is(wrapped, fencing.ErrInvalidArgument) {
		t.Error("a stale token matches ErrInvalidArgument")
	}
	var se *fencing.StaleTokenError
	if !errors.As(wrapped, &se) || se.Highest != 7 {
		t.Errorf("errors.As = %v", se)
	}
	if want := `fencing: stale token 3 for resource "orders": 7 already admitted`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
}
