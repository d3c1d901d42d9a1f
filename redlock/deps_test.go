package redlock_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// forbiddenDeps are import path prefixes that a user of redlock and fencing
// alone must not link: exporters (their own packages carry them) and the
// rival lock libraries (the benchmarks' and the chaos adapters').
// go-redis's own instrumentation lives under its module path, not these.
var forbiddenDeps = []string{
	"github.com/prometheus/",
	"go.opentelemetry.io/",
	"google.golang.org/grpc",
	"github.com/go-redsync/",
	"github.com/bsm/redislock",
}

// TestDepsStayLean: `go list -deps ./redlock ./fencing` lists none of
// forbiddenDeps, while the metrics package does list Prometheus (the check
// sees what it looks for), as does the tracing package OpenTelemetry, and
// the gRPC interceptors' package gRPC.
func TestDepsStayLean(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	root := moduleRoot(t)
	tests := []struct {
		pkgs  []string
		wants string // a forbidden prefix these must list; "" for none
	}{
		{[]string{"./redlock", "./fencing"}, ""},
		{[]string{"./redlock/redlockprom"}, "github.com/prometheus/"},
		{[]string{"./redlock/redlockotel"}, "go.opentelemetry.io/"},
		{[]string{"./fencing/fencinggrpc"}, "google.golang.org/grpc"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.pkgs, ","), func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), "go", append([]string{"list", "-deps"}, tt.pkgs...)...)
			cmd.Dir = root
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list: %v", err)
			}
			seen := map[string]bool{}
			for _, p := range strings.Fields(string(out)) {
				for _, f := range forbiddenDeps {
					if strings.HasPrefix(p, f) {
						seen[f] = true
						if tt.wants == "" {
							t.Errorf("%v depends on %s", tt.pkgs, p)
						}
					}
				}
			}
			if tt.wants != "" && !seen[tt.wants] {
				t.Errorf("%v lists no %s package: the check does not see what it looks for", tt.pkgs, tt.wants)
			}
		})
	}
}

// moduleRoot is the directory of the module's go.mod.
func moduleRoot(t *testing.T) string {
	t.Helper()
	out, err := exec.CommandContext(t.Context(), "go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}
