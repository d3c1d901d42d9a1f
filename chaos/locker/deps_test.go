package locker_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The adapters that import other lock libraries live in packages only the
// chaos harness and the CLI import: what a user of redlock or fencing
// builds must not pull them (nor the observability and RPC stacks).
func TestLibraryDepsLeaveOutTheOtherLocks(t *testing.T) {
	forbidden := []string{
		"github.com/go-redsync/redsync", "github.com/bsm/redislock",
		"github.com/prometheus/", "go.opentelemetry.io/otel", "google.golang.org/grpc",
		"github.com/fencedlock/fencedlock/chaos",
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/fencedlock/fencedlock/redlock", "github.com/fencedlock/fencedlock/fencing").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps listed nothing")
	}
	for _, d := range deps {
		for _, f := range forbidden {
			if strings.HasPrefix(d, f) {
				t.Errorf("redlock or fencing depends on %s", d)
			}
		}
	}
	// The check sees what it is looking for: the chaos adapters do pull them.
	out, err = exec.Command("go", "list", "-deps", "github.com/fencedlock/fencedlock/chaos").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, want := range []string{"github.com/go-redsync/redsync/v4", "github.com/bsm/redislock"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Errorf("go list -deps of chaos lacks %s: the check would not see it either", want)
		}
	}
}
