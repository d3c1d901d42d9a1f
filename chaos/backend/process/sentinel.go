package process

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fencedlock/fencedlock/chaos/internal/sentinel"
	"github.com/fencedlock/fencedlock/internal/redisproc"
)

// sentinelProc is the one Sentinel process of a replicated backend, and
// the watch that moves each node's relay to the primary Sentinel names.
type sentinelProc struct {
	proc *redisproc.Proc
	*sentinel.Client
}

// startSentinel starts a Sentinel monitoring every pair (quorum 1) at its
// primary's replication address, with the timing t, and waits until it
// knows each pair's replica.
func startSentinel(ctx context.Context, pairs []*pair, t sentinel.Timing, startTimeout time.Duration) (*sentinelProc, error) {
	dir, err := os.MkdirTemp("", "sentinel-")
	if err != nil {
		return nil, fmt.Errorf("process: sentinel: %w", err)
	}
	var ms []sentinel.Monitor
	for _, p := range pairs {
		host, port, _ := net.SplitHostPort(p.repl[p.primaryIndex()].Addr())
		ms = append(ms, sentinel.Monitor{Name: p.name, Host: host, Port: port})
	}
	file := filepath.Join(dir, "sentinel.conf") // Sentinel rewrites it
	if err := os.WriteFile(file, []byte(sentinel.Config(ms, t)), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("process: sentinel: %w", err)
	}
	proc, err := redisproc.Start(ctx, redisproc.Config{Dir: dir, ConfigFile: file, Args: []string{"--sentinel"}, StartTimeout: startTimeout})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("process: sentinel: %w", err)
	}
	s := &sentinelProc{proc: proc, Client: sentinel.NewClient(proc.Addr())}
	if err := sentinel.SetPeriods(ctx, proc.Addr(), t, startTimeout); err != nil {
		_ = s.close()
		return nil, fmt.Errorf("process: %w", err)
	}
	for _, p := range pairs {
		if err := p.waitWhole(ctx, s, t, startTimeout+t.Settle()); err != nil {
			_ = s.close()
			return nil, fmt.Errorf("process: %s: %w", p.name, err)
		}
	}
	return s, nil
}

// watch follows Sentinel's +switch-master events until close.
func (s *sentinelProc) watch(pairs []*pair) {
	byName := make(map[string]*pair, len(pairs))
	var names []string
	for _, p := range pairs {
		byName[p.name] = p
		names = append(names, p.name)
	}
	s.Watch(names, func(name, addr string) { byName[name].follow(addr) })
}

// follow asks Sentinel for p's primary and moves p's relay to it.
func (s *sentinelProc) follow(ctx context.Context, p *pair, timeout time.Duration) error {
	addr, err := s.Primary(ctx, p.name, timeout)
	if err != nil {
		return err
	}
	p.follow(addr)
	return nil
}

// logTail is the last n lines of Sentinel's log, joined by " | ".
func (s *sentinelProc) logTail(n int) string {
	b, err := os.ReadFile(filepath.Join(s.proc.Dir(), "redis.log"))
	if err != nil {
		return "(no log)"
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// close stops the watch and Sentinel, and removes its directory.
func (s *sentinelProc) close() error {
	s.Close()
	err := s.proc.Close()
	_ = os.RemoveAll(s.proc.Dir())
	return err
}
