package fencing_test

import (
	"context"
	"math"
	"testing"

	"github.com/fencedlock/fencedlock/fencing"
)

// memStore adds ctx and error to Memory's readers, for the shared suite.
type memStore struct{ *fencing.Memory }

func (m memStore) Highest(_ context.Context, resource string) (uint64, error) {
	return m.Memory.Highest(resource), nil
}

func (m memStore) Log(_ context.Context, resource string) ([]fencing.Entry, error) {
	return m.Memory.Log(resource), nil
}

func TestMemory(t *testing.T) {
	testGuard(t, suite{store: memStore{fencing.NewMemory()}, maxToken: math.MaxUint64, writers: 32, perW: 200})
}

func TestMemoryZeroValue(t *testing.T) {
	var m fencing.Memory
	if got := m.Highest("r"); got != 0 {
		t.Errorf("Highest of a zero Memory = %d", got)
	}
	if err := m.Append(t.Context(), "r", 1, "x"); err != nil {
		t.Fatal(err)
	}
	if got := m.Log("r"); len(got) != 1 || got[0] != (fencing.Entry{Token: 1, Data: "x"}) {
		t.Errorf("Log = %v", got)
	}
}

func TestMemoryLogIsACopy(t *testing.T) {
	m := fencing.NewMemory()
	if err := m.Append(t.Context(), "r", 1, "x"); err != nil {
		t.Fatal(err)
	}
	m.Log("r")[0].Data = "changed"
	if got := m.Log("r")[0].Data; got != "x" {
		t.Errorf("Log entry changed through a returned slice: %q", got)
	}
}
