package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

// TestNodeSourcePrecedence: --nodes before FENCEDLOCK_NODES; a node's
// password from its URL, else --password-file, else FENCEDLOCK_PASSWORD.
func TestNodeSourcePrecedence(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "password")
	if err := os.WriteFile(file, []byte("from-file\r\nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		src       nodeSource
		env       map[string]string
		addrs     string // the nodes' addresses, comma-separated
		passwords string // their passwords, comma-separated
	}{
		{"flag only", nodeSource{nodes: "a:1,b:2"}, nil, "a:1,b:2", ","},
		{"environment only", nodeSource{}, map[string]string{"FENCEDLOCK_NODES": "c:3", "FENCEDLOCK_PASSWORD": "from-env"},
			"c:3", "from-env"},
		{"flag before environment", nodeSource{nodes: "a:1"}, map[string]string{"FENCEDLOCK_NODES": "c:3"}, "a:1", ""},
		{"file before environment", nodeSource{nodes: "a:1", passwordFile: file}, map[string]string{"FENCEDLOCK_PASSWORD": "from-env"},
			"a:1", "from-file"},
		{"URL before file", nodeSource{nodes: "redis://:from-url@a:1,b:2", passwordFile: file}, nil, "a:1,b:2", "from-url,from-file"},
		{"URL before environment", nodeSource{}, map[string]string{"FENCEDLOCK_NODES": "redis://:from-url@a:1,b:2",
			"FENCEDLOCK_PASSWORD": "from-env"}, "a:1,b:2", "from-url,from-env"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := tc.src.options(time.Second, func(k string) string { return tc.env[k] })
			if err != nil {
				t.Fatal(err)
			}
			var addrs, passwords []string
			for _, o := range opts {
				addrs, passwords = append(addrs, o.Addr), append(passwords, o.Password)
			}
			if got := strings.Join(addrs, ","); got != tc.addrs {
				t.Errorf("nodes %s, want %s", got, tc.addrs)
			}
			if got := strings.Join(passwords, ","); got != tc.passwords {
				t.Errorf("passwords %q, want %q", got, tc.passwords)
			}
		})
	}
}

// passwordCluster starts n nodes that require password.
func passwordCluster(t *testing.T, n int, password string) []string {
	t.Helper()
	var addrs []string
	for _, p := range redistest.StartN(t, n) {
		// Set once the node runs: its readiness probe is a PING without AUTH.
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr(), MaxRetries: -1})
		err := rdb.ConfigSet(t.Context(), "requirepass", password).Err()
		_ = rdb.Close()
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, p.Addr())
	}
	return addrs
}

// TestNodesFromEnvironment: run and status find the nodes in
// FENCEDLOCK_NODES and their password in FENCEDLOCK_PASSWORD or a file,
// against servers that require it.
func TestNodesFromEnvironment(t *testing.T) {
	const password = "s3cret-pw"
	nodes := strings.Join(passwordCluster(t, 3, password), ",")
	dir := t.TempDir()
	file := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good, bad := file("good", password+"\n"), file("bad", "wrong\n")
	cases := []struct {
		name  string
		env   map[string]string
		flags []string
		ok    bool
	}{
		{"nodes and password from the environment", map[string]string{"FENCEDLOCK_NODES": nodes, "FENCEDLOCK_PASSWORD": password}, nil, true},
		{"password file", map[string]string{"FENCEDLOCK_NODES": nodes}, []string{"--password-file", good}, true},
		{"password file before the environment", map[string]string{"FENCEDLOCK_NODES": nodes, "FENCEDLOCK_PASSWORD": "wrong"},
			[]string{"--password-file", good}, true},
		{"--nodes before the environment", map[string]string{"FENCEDLOCK_NODES": "127.0.0.1:1", "FENCEDLOCK_PASSWORD": password},
			[]string{"--nodes", nodes}, true},
		{"no password", map[string]string{"FENCEDLOCK_NODES": nodes}, nil, false},
		{"wrong password in the file", map[string]string{"FENCEDLOCK_NODES": nodes, "FENCEDLOCK_PASSWORD": password},
			[]string{"--password-file", bad}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FENCEDLOCK_NODES", "")
			t.Setenv("FENCEDLOCK_PASSWORD", "")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			run := call(t.Context(), append(append([]string{"run", "--key", "job:env"}, tc.flags...), append([]string{"--"}, helper(t, "exit", "0")...)...)...)
			status := call(t.Context(), append([]string{"status", "--key", "job:env"}, tc.flags...)...)
			if tc.ok {
				if run.code != exitOK || status.code != exitNotHeld {
					t.Errorf("run: exit %d (stderr %q); status: exit %d (stderr %q); want 0 and %d (free)",
						run.code, run.stderr, status.code, status.stderr, exitNotHeld)
				}
				return
			}
			// A server refuses a client without the password by NOAUTH, or
			// by a protocol error when the request is large (a script).
			if run.code != exitUnavailable || !strings.Contains(run.stderr, "3 of 3 nodes failed") {
				t.Errorf("run: exit %d, stderr %q; want %d and the nodes' refusal", run.code, run.stderr, exitUnavailable)
			}
			if status.code != exitUnavailable {
				t.Errorf("status: exit %d, stderr %q; want %d", status.code, status.stderr, exitUnavailable)
			}
		})
	}
}

// TestPasswordNotInArgs: with the password in FENCEDLOCK_PASSWORD or a
// file, no process of a `fencedlock run` shows it in its arguments.
func TestPasswordNotInArgs(t *testing.T) {
	const password = "s3cret-pw"
	nodes := strings.Join(passwordCluster(t, 3, password), ",")
	file := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(file, []byte(password+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		env   []string
		flags []string
	}{
		{"environment", []string{"FENCEDLOCK_NODES=" + nodes, "FENCEDLOCK_PASSWORD=" + password}, nil},
		{"password file", []string{"FENCEDLOCK_NODES=" + nodes}, []string{"--password-file", file}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			argv, started := blockingChild(t, false)
			args := append(append([]string{"fencedlock", "run", "--key", "job:ps"}, tc.flags...), append([]string{"--"}, argv...)...)
			fl := exec.Command(os.Args[0], append([]string{helperArg}, args...)...)
			fl.Env = append(os.Environ(), tc.env...)
			var out bytes.Buffer
			fl.Stdout, fl.Stderr = &out, &out
			if err := fl.Start(); err != nil {
				t.Fatal(err)
			}
			child := started() // the lock is held: the password was used
			procs := []int{fl.Process.Pid}
			for _, p := range descendants(fl.Process.Pid) { // proc_linux.go: the supervisor, the command
				procs = append(procs, p.pid)
			}
			if !slices.Contains(procs, child) {
				t.Errorf("the command (pid %d) is not among fencedlock's processes %v", child, procs)
			}
			for _, pid := range procs {
				cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
				if err != nil {
					t.Fatal(err)
				}
				if bytes.Contains(cmdline, []byte(password)) {
					t.Errorf("process %d shows the password in its arguments: %q", pid, cmdline)
				}
			}
			if len(procs) < 3 {
				t.Errorf("processes %v: want fencedlock, its supervisor and the command", procs)
			}
			_ = fl.Process.Signal(syscall.SIGTERM) // passed on to the command, which ends
			if err := fl.Wait(); err != nil && fl.ProcessState.ExitCode() != 128+int(syscall.SIGTERM) {
				t.Errorf("fencedlock: %v; output:\n%s", err, out.String())
			}
		})
	}
}
