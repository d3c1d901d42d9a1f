// Package processtest starts process backends for tests: a Backend of real
// redis-server nodes on free loopback ports, closed at the end of the test.
// It is for tests only.
package processtest

import (
	"testing"

	"github.com/fencedlock/fencedlock/chaos/backend/process"
)

// New starts n process nodes, closed at the end of the test.
func New(t *testing.T, n int) *process.Backend {
	t.Helper()
	b, err := process.New(t.Context(), n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return b
}
