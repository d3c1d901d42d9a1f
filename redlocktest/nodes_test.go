package redlocktest_test

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/redlocktest"
)

func TestClientsReachTheirOwnNode(t *testing.T) {
	ns := redlocktest.Nodes(t, 3)
	ctx := t.Context()
	clients, addrs := ns.Clients(), ns.Addrs()
	if len(clients) != 3 || len(addrs) != 3 {
		t.Fatalf("%d clients, %d addresses for 3 nodes", len(clients), len(addrs))
	}
	for i, n := range ns {
		o := n.Client().Options()
		if clients[i] != n.Client() || addrs[i] != n.Addr() || o.Addr != n.Addr() {
			t.Errorf("node %d: client of %s, address %s, in the lists %v and %s", i, o.Addr, n.Addr(), clients[i], addrs[i])
		}
		if !o.ContextTimeoutEnabled || o.MaxRetries != 0 { // -1 reads back as 0: no retries
			t.Errorf("node %d: ContextTimeoutEnabled %v, MaxRetries %d; want true, 0", i, o.ContextTimeoutEnabled, o.MaxRetries)
		}
		if n.Addr() == n.ServerAddr() {
			t.Errorf("node %d: clients dial the server itself, not a proxy", i)
		}
		if err := clients[i].Set(ctx, "k", n.ServerAddr(), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for i, n := range ns {
		if v := direct(t, n).Get(ctx, "k").Val(); v != n.ServerAddr() {
			t.Errorf("node %d holds %q, the value sent through client %d", i, v, i)
		}
	}
}

func TestNewRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name string
		n    int
		opts []redlocktest.Option
	}{
		{"no nodes", 0, nil},
		{"negative", -1, nil},
		{"nil option", 1, []redlocktest.Option{nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, err := redlocktest.New(t.Context(), tc.n, tc.opts...)
			if err == nil {
				_ = ns.Close()
				t.Fatal("New succeeded")
			}
		})
	}
}

// TestCloseLeavesNothingBehind: no process, directory, listener or
// goroutine outlives Close.
func TestCloseLeavesNothingBehind(t *testing.T) {
	before := goleak.IgnoreCurrent()
	ns, err := redlocktest.New(t.Context(), 2, redlocktest.WithAOF())
	if err != nil {
		t.Fatal(err)
	}
	ns[1].Partition() // with connections cut
	_ = ns[1].Pause() // and a frozen process
	type left struct {
		pid        int
		dir, proxy string
	}
	var was []left
	for _, n := range ns {
		was = append(was, left{n.PID(), n.Dir(), n.Addr()})
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if err := ns.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	for i, w := range was {
		if err := syscall.Kill(w.pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("node %d: process %d still there after Close (kill -0: %v)", i, w.pid, err)
		}
		if _, err := os.Stat(w.dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("node %d: directory %s still there after Close (%v)", i, w.dir, err)
		}
		if c, err := net.Dial("tcp", w.proxy); err == nil {
			_ = c.Close()
			t.Errorf("node %d: proxy %s still accepts after Close", i, w.proxy)
		}
	}
	goleak.VerifyNone(t, before)
}

// TestNodesWithoutServer runs a test that calls Nodes with an empty PATH,
// in a child process, with and without CI=true.
func TestNodesWithoutServer(t *testing.T) {
	if os.Getenv("REDLOCKTEST_CHILD") == "1" {
		redlocktest.Nodes(t, 1)
		t.Error("Nodes returned without redis-server")
		return
	}
	const install = "install it (Debian and Ubuntu: the redis-server package)"
	for _, tc := range []struct {
		ci       string
		wantExit bool // a failure
		want     string
	}{
		{"", false, "--- SKIP: TestNodesWithoutServer"},
		{"false", false, "--- SKIP: TestNodesWithoutServer"},
		{"true", true, "--- FAIL: TestNodesWithoutServer"},
	} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestNodesWithoutServer$", "-test.v")
			for _, kv := range os.Environ() {
				if k, _, _ := strings.Cut(kv, "="); k != "PATH" && k != "CI" {
					cmd.Env = append(cmd.Env, kv)
				}
			}
			cmd.Env = append(cmd.Env, "REDLOCKTEST_CHILD=1", "PATH="+t.TempDir(), "CI="+tc.ci)
			if _, set := os.LookupEnv("GORACE"); !set {
				// The race detector's exit otherwise waits a second.
				cmd.Env = append(cmd.Env, "GORACE=atexit_sleep_ms=0")
			}
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if failed := errors.As(err, &exit); failed != tc.wantExit || err != nil && !failed {
				t.Errorf("child exited with %v, want a failure: %v", err, tc.wantExit)
			}
			for _, w := range []string{tc.want, install} {
				if !strings.Contains(string(out), w) {
					t.Errorf("child's output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestNewWithoutServer(t *testing.T) {
	ns, err := redlocktest.New(context.Background(), 1, redlocktest.WithBinary("/nonexistent/redis-server"))
	if !errors.Is(err, redlocktest.ErrNoServer) {
		if err == nil {
			_ = ns.Close()
		}
		t.Fatalf("New with a missing binary: %v, want %v", err, redlocktest.ErrNoServer)
	}
	if !strings.Contains(err.Error(), "/nonexistent/redis-server") {
		t.Errorf("the error does not name the binary it looked for: %v", err)
	}
}
