package backend_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/chaos/backend/process"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newBackend starts n process nodes, closed at the end of the test.
func newBackend(t *testing.T, n int) *process.Backend {
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
