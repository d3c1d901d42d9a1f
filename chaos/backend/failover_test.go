package backend_test

import (
	"errors"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/backend/process/processtest"
)

// A backend with no replicas cannot fail a node over: the fault says so,
// and leaves nothing to undo.
func TestFailoverUnsupportedWithoutReplicas(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    backend.Backend
	}{
		{"process backend without replicas", processtest.New(t, 1)},
		{"backend without the capability", &backendtest.Recording{N: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			undo, err := backend.Failover{Node: 0, Lag: time.Millisecond}.Inject(t.Context(), tc.b)
			if !errors.Is(err, backend.ErrUnsupported) || undo != nil {
				t.Fatalf("Inject = undo %v, %v; want ErrUnsupported", undo != nil, err)
			}
		})
	}
}
