package docker_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/chaos/backend/docker"
	"github.com/fencedlock/fencedlock/chaos/internal/testenv"
)

// newDockerBackend starts n container nodes from $FENCEDLOCK_REDIS_IMAGE
// (default: New's), closed at the end of the test, which then checks
// that nothing of this process was left in the engine.
func newDockerBackend(t *testing.T, n int, opts ...docker.Option) *docker.Backend {
	t.Helper()
	testenv.RequireDocker(t)
	if _, err := docker.Sweep(t.Context()); err != nil {
		t.Logf("sweeping what dead runs left: %v", err)
	}
	if img := os.Getenv("FENCEDLOCK_REDIS_IMAGE"); img != "" {
		opts = append([]docker.Option{docker.WithImage(img)}, opts...)
	}
	b, err := docker.New(t.Context(), n, opts...)
	if errors.Is(err, docker.ErrNoImage) {
		testenv.SkipOrFail(t, "docker works, but: %v\nbuild the image with scripts/redis-image.sh (make image)", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		left, err := docker.Sweep(context.Background(), docker.SweepOwn())
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
func containerID(t *testing.T, b *docker.Backend, i int) string {
	t.Helper()
	id, err := b.ContainerID(i)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// pingByAlias runs redis-cli inside node from's container against node to's
// alias on the backend's network: what another container there would see.
func pingByAlias(t *testing.T, b *docker.Backend, from, to int) error {
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
func networks(t *testing.T, b *docker.Backend, i int) string {
	t.Helper()
	out, err := dockerCLI(t.Context(), "inspect", "--format",
		`{{range $k, $v := .NetworkSettings.Networks}}{{$k}}={{join $v.Aliases ","}};{{end}}`, containerID(t, b, i))
	if err != nil {
		t.Fatalf("docker inspect: %v: %s", err, out)
	}
	return out
}
