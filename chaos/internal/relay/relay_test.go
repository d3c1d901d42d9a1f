package relay_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/chaos/backend/backendtest"
	"github.com/fencedlock/fencedlock/chaos/internal/netfault"
	"github.com/fencedlock/fencedlock/chaos/internal/relay"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Retarget closes the connections to the old server and sends new ones to
// the new one; SetUpstream moves only new ones; "" closes each at once.
func TestRetarget(t *testing.T) {
	a, b := redistest.Start(t), redistest.Start(t)
	r, err := relay.New(netfault.NewState())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Close)
	ctx := t.Context()
	// One connection, no retries: a closed connection shows as an error.
	c := redis.NewClient(&redis.Options{Addr: r.Addr(), PoolSize: 1, MaxRetries: -1, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	// The server each command reaches, by its port in CONFIG GET port.
	server := func() (string, error) {
		v, err := c.ConfigGet(ctx, "port").Result()
		return v["port"], err
	}
	port := func(addr string) string { return addr[len("127.0.0.1:"):] }

	r.SetUpstream(a.Addr())
	if got, err := server(); err != nil || got != port(a.Addr()) {
		t.Fatalf("first command reached port %s (%v), want %s", got, err, port(a.Addr()))
	}
	r.SetUpstream(b.Addr())
	if got, err := server(); err != nil || got != port(a.Addr()) {
		t.Fatalf("after SetUpstream the open connection reached port %s (%v), want still %s", got, err, port(a.Addr()))
	}
	r.SetUpstream(a.Addr())
	r.Retarget(b.Addr())
	// a sees its relayed connection end: only the one asking is left.
	direct := redis.NewClient(&redis.Options{Addr: a.Addr(), PoolSize: 1})
	t.Cleanup(func() { _ = direct.Close() })
	backendtest.Eventually(t, 2*time.Second, "the relayed connection to the old server ends", func() error {
		list, err := direct.ClientList(ctx).Result()
		if err == nil && strings.Count(list, "\n") != 1 {
			err = fmt.Errorf("clients:\n%s", list)
		}
		return err
	})
	if got, err := server(); err != nil || got != port(b.Addr()) {
		t.Fatalf("after Retarget a new connection reached port %s (%v), want %s", got, err, port(b.Addr()))
	}
	r.Retarget(b.Addr()) // the same target: nothing closes
	if got, err := server(); err != nil || got != port(b.Addr()) {
		t.Fatalf("Retarget to the same server closed the connection: %s, %v", got, err)
	}
	r.Retarget("")
	if _, err := server(); err == nil {
		t.Fatal("a command went through with no upstream")
	}
	if _, err := server(); err == nil {
		t.Fatal("a new connection went through with no upstream")
	}
}
