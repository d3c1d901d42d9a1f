package main

import (
	"strings"
	"testing"
)

func TestBadUsage(t *testing.T) {
	const n = "127.0.0.1:1" // never dialled: usage is checked first
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no arguments", nil, "Usage:\n  fencedlock run"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"run: unknown flag", []string{"run", "--bogus"}, "flag provided but not defined: -bogus"},
		{"run: no --nodes", []string{"run", "--key", "k", "--", "true"}, "--nodes is required"},
		{"run: no --key", []string{"run", "--nodes", n, "--", "true"}, "--key is required"},
		{"run: bad duration", []string{"run", "--nodes", n, "--key", "k", "--ttl", "soon", "--", "true"}, `invalid value "soon" for flag -ttl`},
		{"run: ttl not positive", []string{"run", "--nodes", n, "--key", "k", "--ttl", "0s", "--", "true"}, "--ttl 0s is not positive"},
		{"run: ttl too short", []string{"run", "--nodes", n, "--key", "k", "--ttl", "1ms", "--", "true"}, "leaves no validity"},
		{"run: negative wait", []string{"run", "--nodes", n, "--key", "k", "--wait", "-1s", "--", "true"}, "--wait -1s is negative"},
		{"run: negative grace", []string{"run", "--nodes", n, "--key", "k", "--grace", "-1s", "--", "true"}, "--grace -1s is negative"},
		{"run: no command", []string{"run", "--nodes", n, "--key", "k"}, "no command to run"},
		{"run: nothing after --", []string{"run", "--nodes", n, "--key", "k", "--"}, "no command to run"},
		{"run: node without port", []string{"run", "--nodes", "127.0.0.1", "--key", "k", "--", "true"}, "is not host:port"},
		{"run: bad port", []string{"run", "--nodes", "127.0.0.1:99999", "--key", "k", "--", "true"}, "bad port"},
		{"run: node twice", []string{"run", "--nodes", n + "," + n, "--key", "k", "--", "true"}, "given twice"},
		{"run: empty node", []string{"run", "--nodes", n + ",,127.0.0.1:2", "--key", "k", "--", "true"}, "empty entry"},
		{"run: bad URL", []string{"run", "--nodes", "unix:///tmp/redis.sock", "--key", "k", "--", "true"}, "only redis:// and rediss://"},
		{"status: no --nodes", []string{"status", "--key", "k"}, "--nodes is required"},
		{"status: no --key", []string{"status", "--nodes", n}, "--key is required"},
		{"status: bad timeout", []string{"status", "--nodes", n, "--key", "k", "--node-timeout", "0s"}, "--node-timeout 0s is not positive"},
		{"status: extra arguments", []string{"status", "--nodes", n, "--key", "k", "extra"}, "unexpected arguments: extra"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t.Context(), tc.args...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, exitUsage, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.msg) || !strings.Contains(r.stderr, "Usage: ") && !strings.Contains(r.stderr, "Usage:\n") {
				t.Errorf("stderr lacks %q or the usage:\n%s", tc.msg, r.stderr)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "Usage:\n  fencedlock run"},
		{[]string{"help"}, "Usage:\n  fencedlock run"},
		{[]string{"help", "run"}, "Usage: fencedlock run"},
		{[]string{"run", "--help"}, "Exit status:\n  COMMAND's status"},
		{[]string{"status", "-h"}, "Usage: fencedlock status"},
		{[]string{"version"}, "fencedlock "},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			r := call(t.Context(), tc.args...)
			if r.code != exitOK || !strings.Contains(r.stdout, tc.want) || r.stderr != "" {
				t.Errorf("exit %d, stdout %q, stderr %q; want 0 and %q", r.code, r.stdout, r.stderr, tc.want)
			}
		})
	}
}

// TestRunHelpSaysWhatIsStopped: `run --help` says which processes are stopped
// when the lock is lost, and which could escape.
func TestRunHelpSaysWhatIsStopped(t *testing.T) {
	r := call(t.Context(), "run", "--help")
	help := strings.Join(strings.Fields(r.stdout), " ")
	for _, want := range []string{
		"child subreaper", "double-forks or calls setsid", "the whole tree gets SIGTERM and SIGCONT, then SIGKILL after --grace",
		"fencedlock dies, even by kill -9", "Ctrl-Z", "SIGTTIN", "What escapes:", "if the supervisor itself is killed",
		"every process that leaves COMMAND's process group", "is not passed on a second time",
		"it is stopped (kill -STOP, a debugger, strace) or hung", "fencedlock, which holds the lock, then ends the tree itself",
		"while fencedlock and the supervisor are both stopped", "only the fencing token protects the store",
	} {
		if !strings.Contains(help, want) {
			t.Errorf("run --help lacks %q", want)
		}
	}
}
