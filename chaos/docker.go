package chaos

import (
	"context"
	"fmt"
	"os"

	"github.com/fencedlock/fencedlock/chaos/backend"
	"github.com/fencedlock/fencedlock/chaos/backend/docker"
)

// ImageEnv names the environment variable that picks the Redis image of the
// docker backend. Unset: docker.LocalImage if the engine has it (built by
// scripts/redis-image.sh, with no registry), otherwise docker.PublicImage
// (redis:7.0), pulled if missing.
const ImageEnv = "FENCEDLOCK_REDIS_IMAGE"

// ryukEnv turns testcontainers-go's Ryuk reaper on or off.
const ryukEnv = "TESTCONTAINERS_RYUK_DISABLED"

// newDocker starts the nodes as containers. The harness removes its own
// containers, volumes and network when the run ends, and sweeps those of
// runs that died at the next start, so it needs no Ryuk: unless the user set
// TESTCONTAINERS_RYUK_DISABLED, it is turned off, since its image must be
// pulled and no registry may be reachable.
func newDocker(ctx context.Context, cfg Config) (backend.Backend, error) {
	if _, set := os.LookupEnv(ryukEnv); !set {
		if err := os.Setenv(ryukEnv, "true"); err != nil {
			return nil, fmt.Errorf("chaos: %w", err)
		}
	}
	if _, err := docker.Sweep(ctx); err != nil {
		// Leftovers of dead runs only cost disk: go on.
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "chaos: sweeping old containers: %v\n", err)
		}
	}
	var opts []docker.Option
	if img := os.Getenv(ImageEnv); img != "" {
		opts = append(opts, docker.WithImage(img))
	}
	if cfg.Replicas {
		opts = append(opts, docker.WithReplicas(cfg.TTL))
	}
	b, err := docker.New(ctx, cfg.Nodes, opts...)
	if err != nil {
		return nil, fmt.Errorf("chaos: starting %d Redis containers: %w", cfg.Nodes, err)
	}
	return b, nil
}
