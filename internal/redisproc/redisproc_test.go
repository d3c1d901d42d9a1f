package redisproc_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestRestartKeepsOrLosesData(t *testing.T) {
	for _, tc := range []struct {
		name     string
		withData bool
		want     string
	}{
		{"with data", true, "v"},
		{"without data", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := redistest.Start(t, redistest.WithAOF())
			c := redistest.Client(t, p)
			ctx := t.Context()
			if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
				t.Fatal(err)
			}
			if err := p.Restart(ctx, tc.withData); err != nil {
				t.Fatal(err)
			}
			got, err := c.Get(ctx, "k").Result()
			if err != nil && err != redis.Nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("after restart(withData=%v): got %q, want %q", tc.withData, got, tc.want)
			}
		})
	}
}

func TestPauseBlocksAndResumeAnswers(t *testing.T) {
	p := redistest.Start(t)
	if err := p.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := redisproc.Ping(t.Context(), p.Addr(), 100*time.Millisecond); err == nil {
		t.Fatal("paused node answered PING")
	}
	if err := p.Resume(); err != nil {
		t.Fatal(err)
	}
	if err := redisproc.Ping(t.Context(), p.Addr(), time.Second); err != nil {
		t.Fatalf("resumed node: %v", err)
	}
}

func TestKillStopsNode(t *testing.T) {
	p := redistest.Start(t)
	if err := p.Kill(); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("node still running after Kill")
	}
	if err := redisproc.Ping(context.Background(), p.Addr(), 100*time.Millisecond); err == nil {
		t.Fatal("killed node answered PING")
	}
	if err := p.Pause(); err != redisproc.ErrNotRunning {
		t.Fatalf("Pause on killed node: %v, want ErrNotRunning", err)
	}
}

func TestSetEnvAppliesAtNextStart(t *testing.T) {
	// redis-server overwrites its environment block for its process title,
	// so a wrapper script notes what each start was given.
	dir := t.TempDir()
	seen := filepath.Join(dir, "seen")
	wrapper := filepath.Join(dir, "redis-server")
	script := fmt.Sprintf("#!/bin/sh\necho \"start:$FENCEDLOCK_TEST_ENV\" >> %q\nexec redis-server \"$@\"\n", seen)
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	p, err := redisproc.Start(t.Context(), redisproc.Config{Binary: wrapper, Env: []string{"FENCEDLOCK_TEST_ENV=old"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })

	p.SetEnv([]string{"FENCEDLOCK_TEST_ENV=new"})
	if err := p.Restart(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	p.SetEnv(nil)
	if err := p.Restart(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(b)), []string{"start:old", "start:new", "start:"}; !slices.Equal(got, want) {
		t.Fatalf("environments seen %q, want %q", got, want)
	}
}
