// Package testenv decides what the tests of the chaos packages may skip.
// Outside CI, a test whose tool is missing (a Docker engine, an image,
// libfaketime, Chromium) skips, saying what to install. Under CI=true it
// fails instead: `make test` installs every tool (scripts/deps.sh) and builds
// the image, so in CI a skip would only hide a test that did not run. The
// one exception is a machine without a Docker engine at all (`docker info`
// fails): there the container tests skip, in CI too.
package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// CI reports whether the tests run under CI=true.
func CI() bool { return os.Getenv("CI") == "true" }

// SkipOrFail skips t, saying why, or fails it under CI=true.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if CI() {
		t.Fatalf("CI=true, and a test would skip: "+format, args...)
		return
	}
	t.Skipf(format, args...)
}

// dockerInfo runs `docker info` once per test binary.
var dockerInfo = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "info").CombinedOutput()
	if err != nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		return fmt.Errorf("%w: %s", err, lines[len(lines)-1])
	}
	return nil
})

// RequireDocker skips t when there is no Docker engine (`docker info`
// fails), in CI too. With an engine, nothing the test needs may be missing:
// use SkipOrFail for the rest. It turns testcontainers-go's Ryuk reaper off
// unless the user set TESTCONTAINERS_RYUK_DISABLED: the harness removes its
// own containers, and Ryuk's image would have to be pulled.
func RequireDocker(t *testing.T) {
	t.Helper()
	if err := dockerInfo(); err != nil {
		t.Skipf("docker not available: docker info: %v (the container tests did not run)", err)
	}
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}
