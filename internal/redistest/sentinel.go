package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// Sentinel is one Redis Sentinel (redis-server --sentinel) watching one
// primary per master name, all real processes on loopback ports.
type Sentinel struct {
	Proc      *redisproc.Proc            // the sentinel
	Primaries map[string]*redisproc.Proc // by master name
}

// StartSentinel starts a primary for each master name and a sentinel that
// monitors them all (quorum 1), and waits until the sentinel reports each
// primary's address.
func StartSentinel(t testing.TB, names ...string) *Sentinel {
	t.Helper()
	s := &Sentinel{Primaries: make(map[string]*redisproc.Proc, len(names))}
	var conf strings.Builder
	for _, name := range names {
		p := Start(t)
		s.Primaries[name] = p
		fmt.Fprintf(&conf, "sentinel monitor %s 127.0.0.1 %d 1\n", name, p.Port())
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "sentinel.conf") // the sentinel rewrites it
	if err := os.WriteFile(file, []byte(conf.String()), 0o600); err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s.Proc = startConfig(t, redisproc.Config{Dir: dir, ConfigFile: file, Args: []string{"--sentinel"}})
	admin := Client(t, s.Proc)
	for name, p := range s.Primaries {
		waitFor(t, 10*time.Second, "sentinel address for "+name, func() bool {
			addr, err := admin.Do(context.Background(), "SENTINEL", "get-master-addr-by-name", name).StringSlice()
			return err == nil && len(addr) == 2 && addr[1] == strconv.Itoa(p.Port())
		})
	}
	return s
}

// FailoverClient returns a go-redis failover client for the primary named
// name, closed at the end of the test.
func (s *Sentinel) FailoverClient(t testing.TB, name string) *redis.Client {
	t.Helper()
	c := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: name, SentinelAddrs: []string{s.Proc.Addr()}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
