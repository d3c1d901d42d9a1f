package chaos

import (
	"context"
	"errors"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

func newDocker(context.Context, Config) (backend.Backend, error) {
	return nil, errors.New("chaos: the docker backend is not built yet")
}
