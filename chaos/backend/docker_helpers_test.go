package backend_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

// dockerInfo runs `docker info` once per test binary. The container tests
// run when it works and are skipped, saying why, when it does not; under
// CI=true a working docker never skips them.
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

// requireDocker skips t when there is no Docker engine.
func requireDocker(t *testing.T) {
	t.Helper()
	if err := dockerInfo(); err != nil {
		t.Skipf("docker not available: docker info: %v", err)
	}
	// The backend removes its own containers; Ryuk's image may not be
	// pullable here. The user's setting wins.
	if _, set := os.LookupEnv("TESTCONTAINERS_RYUK_DISABLED"); !set {
		t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
}

// newDockerBackend starts n container nodes from $FENCEDLOCK_REDIS_IMAGE
// (default: NewDocker's), closed at the end of the test, which then checks
// that nothing of this process was left in the engine.
func newDockerBackend(t *testing.T, n int, opts ...backend.DockerOption) *backend.Docker {
	t.Helper()
	requireDocker(t)
	if _, err := backend.SweepDocker(t.Context()); err != nil {
		t.Logf("sweeping what dead runs left: %v", err)
	}
	if img := os.Getenv("FENCEDLOCK_REDIS_IMAGE"); img != "" {
		opts = append([]backend.DockerOption{backend.WithImage(img)}, opts...)
	}
	b, err := backend.NewDocker(t.Context(), n, opts...)
	if errors.Is(err, backend.ErrNoImage) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("docker works, but: %v\nbuild the image first: scripts/redis-image.sh (make image)", err)
		}
		t.Skipf("docker works, but: %v\nbuild the image with scripts/redis-image.sh", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		left, err := backend.SweepDocker(context.Background(), backend.SweepOwn())
		if err != nil {
			t.Errorf("sweep: %v", err)
		}
		if left > 0 {
			t.Errorf("Close left %d containers, volumes or networks behind", left)
		}
	})
	return b
}

// dockerCLI runs the docker command line and returns its trimmed output.
func dockerCLI(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// containerID is node i's container.
func containerID(t *testing.T, b *backend.Docker, i int) string {
	t.Helper()
	id, err := b.ContainerID(i)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// pingByAlias runs redis-cli inside node from's container against node to's
// alias on the backend's network: what another container there would see.
func pingByAlias(t *testing.T, b *backend.Docker, from, to int) error {
	t.Helper()
	out, err := dockerCLI(t.Context(), "exec", containerID(t, b, from),
		"redis-cli", "-h", fmt.Sprintf("node%d", to), "ping")
	if err == nil && out != "PONG" {
		err = errors.New("no PONG")
	}
	if err != nil {
		return fmt.Errorf("%w: %s", err, out)
	}
	return nil
}

// networks lists the networks node i's container is attached to, with
// their aliases.
func networks(t *testing.T, b *backend.Docker, i int) string {
	t.Helper()
	out, err := dockerCLI(t.Context(), "inspect", "--format",
		`{{range $k, $v := .NetworkSettings.Networks}}{{$k}}={{join $v.Aliases ","}};{{end}}`, containerID(t, b, i))
	if err != nil {
		t.Fatalf("docker inspect: %v: %s", err, out)
	}
	return out
}
