package backend_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/chaos/backend"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newBackend starts n process nodes, closed at the end of the test.
func newBackend(t *testing.T, n int, opts ...backend.ProcessOption) *backend.Process {
	t.Helper()
	b, err := backend.NewProcess(t.Context(), n, opts...)
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

// newClient returns a client with short timeouts and no retries, so that a
// faulty node shows at once; closed at the end of the test.
func newClient(t *testing.T, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:         addr,
		DialTimeout:  300 * time.Millisecond,
		ReadTimeout:  150 * time.Millisecond,
		WriteTimeout: 150 * time.Millisecond,
		MaxRetries:   -1,
		PoolSize:     2,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// eventually polls f until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %v: %v", what, timeout, err)
		}
		select {
		case <-tick.C:
		case <-t.Context().Done():
			t.Fatalf("%s: %v", what, t.Context().Err())
		}
	}
}

// get returns the value of key, "" if it is missing.
func get(ctx context.Context, c *redis.Client, key string) (string, error) {
	v, err := c.Get(ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return v, err
}
