package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBadUsage: every usage error is one line that names the flag and the
// problem, then a pointer to the command's help, and exit 2; the help itself
// is not printed (it would push the line off the screen).
func TestBadUsage(t *testing.T) {
	const n = "127.0.0.1:1" // never dialled: usage is checked first
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	countNotAddrs := "--nodes takes a comma-separated list of node addresses (e.g. 10.0.0.1:6379,10.0.0.2:6379,10.0.0.3:6379), not a count"
	cases := []struct {
		name string
		args []string
		want string // the one line
		help string // the command whose help the Try line names ("" for the main help)
	}{
		{"no arguments", nil, "fencedlock: no command given", ""},
		{"unknown command", []string{"frobnicate"}, `fencedlock: unknown command "frobnicate"`, ""},
		{"version: arguments", []string{"version", "x"}, "fencedlock version: unexpected arguments: x", ""},
		{"run: unknown flag", []string{"run", "--bogus"}, "fencedlock run: unknown flag --bogus", "run"},
		{"run: flag without value", []string{"run", "--key"}, "fencedlock run: missing value for --key", "run"},
		{"run: no --nodes", []string{"run", "--key", "k", "--", "true"},
			"fencedlock run: --nodes is required (or FENCEDLOCK_NODES): a comma-separated list of node addresses", "run"},
		{"run: a count for --nodes", []string{"run", "--nodes", "5", "--key", "k", "--", "true"}, "fencedlock run: " + countNotAddrs, "run"},
		{"run: no --key", []string{"run", "--nodes", n, "--", "true"}, "fencedlock run: --key is required", "run"},
		{"run: bad duration", []string{"run", "--nodes", n, "--key", "k", "--ttl", "soon", "--", "true"},
			`fencedlock run: invalid value "soon" for --ttl: parse error`, "run"},
		{"run: ttl not positive", []string{"run", "--nodes", n, "--key", "k", "--ttl", "0s", "--", "true"},
			"fencedlock run: --ttl 0s is not positive", "run"},
		{"run: negative wait", []string{"run", "--nodes", n, "--key", "k", "--wait", "-1s", "--", "true"},
			"fencedlock run: --wait -1s is negative", "run"},
		{"run: bad wait", []string{"run", "--nodes", n, "--key", "k", "--wait", "always", "--", "true"},
			`fencedlock run: invalid value "always" for --wait: not a duration (e.g. 30s, 5m) or "forever"`, "run"},
		{"run: negative grace", []string{"run", "--nodes", n, "--key", "k", "--grace", "-1s", "--", "true"},
			"fencedlock run: --grace -1s is negative", "run"},
		{"run: no command", []string{"run", "--nodes", n, "--key", "k"}, "fencedlock run: no command to run (give it after --)", "run"},
		{"run: nothing after --", []string{"run", "--nodes", n, "--key", "k", "--"}, "fencedlock run: no command to run (give it after --)", "run"},
		{"run: node without port", []string{"run", "--nodes", "127.0.0.1", "--key", "k", "--", "true"},
			`fencedlock run: --nodes: node "127.0.0.1" is not host:port: address 127.0.0.1: missing port in address`, "run"},
		{"run: bad port", []string{"run", "--nodes", "127.0.0.1:99999", "--key", "k", "--", "true"},
			`fencedlock run: --nodes: node "127.0.0.1:99999": bad port "99999"`, "run"},
		{"run: node twice", []string{"run", "--nodes", n + "," + n, "--key", "k", "--", "true"},
			"fencedlock run: --nodes: node 127.0.0.1:1 is given twice (it would count twice toward the quorum)", "run"},
		{"run: empty node", []string{"run", "--nodes", n + ",,127.0.0.1:2", "--key", "k", "--", "true"},
			`fencedlock run: --nodes: "127.0.0.1:1,,127.0.0.1:2" has an empty entry`, "run"},
		{"run: bad URL", []string{"run", "--nodes", "unix:///tmp/redis.sock", "--key", "k", "--", "true"},
			`fencedlock run: --nodes: node "unix:///tmp/redis.sock": only redis:// and rediss:// URLs are supported`, "run"},
		{"run: missing password file", []string{"run", "--nodes", n, "--key", "k", "--password-file", empty + ".none", "--", "true"},
			"fencedlock run: --password-file: open " + empty + ".none: no such file or directory", "run"},
		{"run: empty password file", []string{"run", "--nodes", n, "--key", "k", "--password-file", empty, "--", "true"},
			"fencedlock run: --password-file " + empty + ": the first line is empty", "run"},
		{"status: unknown flag", []string{"status", "--wait", "1s"}, "fencedlock status: unknown flag --wait", "status"},
		{"status: no --nodes", []string{"status", "--key", "k"},
			"fencedlock status: --nodes is required (or FENCEDLOCK_NODES): a comma-separated list of node addresses", "status"},
		{"status: a count for --nodes", []string{"status", "--nodes", "3", "--key", "k"}, "fencedlock status: " + countNotAddrs, "status"},
		{"status: no --key", []string{"status", "--nodes", n}, "fencedlock status: --key is required", "status"},
		{"status: bad timeout", []string{"status", "--nodes", n, "--key", "k", "--node-timeout", "0s"},
			"fencedlock status: --node-timeout 0s is not positive", "status"},
		{"status: extra arguments", []string{"status", "--nodes", n, "--key", "k", "extra"}, "fencedlock status: unexpected arguments: extra", "status"},
		{"doctor: unknown flag", []string{"doctor", "--key", "k"}, "fencedlock doctor: unknown flag --key", "doctor"},
		{"doctor: a count for --nodes", []string{"doctor", "--nodes", "5"}, "fencedlock doctor: " + countNotAddrs, "doctor"},
		{"chaos: unknown flag", []string{"chaos", "--bogus"}, "fencedlock chaos: unknown flag --bogus", "chaos"},
		{"chaos: addresses for --nodes", []string{"chaos", "--nodes", "10.0.0.1:6379,10.0.0.2:6379"},
			"fencedlock chaos: --nodes takes a count of nodes to start (e.g. --nodes 5), not addresses; " +
				"chaos always starts its own nodes (--backend process or docker); to check nodes of your own, use 'fencedlock doctor --nodes ADDRS'", "chaos"},
		{"chaos: one address for --nodes", []string{"chaos", "--nodes", "redis://db:6379"},
			"fencedlock chaos: --nodes takes a count of nodes to start (e.g. --nodes 5), not addresses; " +
				"chaos always starts its own nodes (--backend process or docker); to check nodes of your own, use 'fencedlock doctor --nodes ADDRS'", "chaos"},
		{"chaos: not a number", []string{"chaos", "--nodes", "five"}, `fencedlock chaos: --nodes "five" is not a count of nodes to start (e.g. --nodes 5)`, "chaos"},
		{"chaos: zero nodes", []string{"chaos", "--nodes", "0"}, "fencedlock chaos: --nodes must be at least 1", "chaos"},
		{"check: addresses for --nodes", []string{"check", "--nodes", "127.0.0.1:6379", "history.jsonl"},
			"fencedlock check: --nodes takes a count of the lock nodes the history was recorded with (e.g. --nodes 5), not addresses; " +
				"check reads a recorded history and talks to no node (to check nodes, use 'fencedlock doctor --nodes ADDRS')", "check"},
		{"check: no file", []string{"check"}, "fencedlock check: want one history FILE, got 0 arguments", "check"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("FENCEDLOCK_NODES", "")
			t.Setenv("FENCEDLOCK_PASSWORD", "")
			r := call(t.Context(), tc.args...)
			try := "Try 'fencedlock --help'."
			if tc.help != "" {
				try = "Try 'fencedlock " + tc.help + " --help'."
			}
			if want := tc.want + "\n" + try + "\n"; r.code != exitUsage || r.stderr != want {
				t.Errorf("exit %d, stderr\n%q\nwant exit %d, stderr\n%q", r.code, r.stderr, exitUsage, want)
			}
			if strings.Contains(r.stderr, "Usage:") || strings.Contains(r.stderr, "Flags:") {
				t.Errorf("the help was printed with the error:\n%s", r.stderr)
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
		{[]string{"run", "--help"}, "--wait forever waits"},
		{[]string{"run", "--help"}, "FENCEDLOCK_HOLDER"},
		{[]string{"chaos", "--help"}, "\n  rolling               the rolling restarts instead of a list"},
		{[]string{"chaos", "--help"}, "fencedlock-reacquire (fencedlock whose extensions"},
		{[]string{"status", "-h"}, "Usage: fencedlock status"},
		{[]string{"status", "--help"}, "0   a quorum holds the key"},
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

// TestHelpSaysWhatNodesMeans: each command's help says whether --nodes is
// a list of addresses or a count, and the address commands say where else
// the nodes and their password may come from.
func TestHelpSaysWhatNodesMeans(t *testing.T) {
	cases := []struct {
		cmd  string
		want []string
	}{
		{"run", []string{"--nodes ADDRS is a list of node addresses (not a count", "FENCEDLOCK_NODES", "FENCEDLOCK_PASSWORD",
			"--password-file FILE", "a password in a URL shows in ps"}},
		{"status", []string{"--nodes ADDRS is a list of node addresses (not a count", "FENCEDLOCK_NODES", "--password-file FILE"}},
		{"doctor", []string{"--nodes ADDRS is a list of node addresses (not a count", "FENCEDLOCK_NODES", "--password-file FILE"}},
		{"chaos", []string{"--nodes N", "how many Redis nodes to start: a count N, not addresses", "(default 5)"}},
		{"check", []string{"--nodes N", "a count, not addresses"}},
	}
	for _, tc := range cases {
		t.Run(tc.cmd, func(t *testing.T) {
			r := call(t.Context(), tc.cmd, "--help")
			for _, w := range tc.want {
				if !strings.Contains(r.stdout, w) {
					t.Errorf("%s --help lacks %q", tc.cmd, w)
				}
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

// TestBadUsageProcess: the same as a process of its own, as a shell sees
// it: stderr and the exit status, nothing on stdout.
func TestBadUsageProcess(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"run", "--wait"}, "fencedlock run: missing value for --wait\nTry 'fencedlock run --help'.\n"},
		{[]string{"chaos", "--nodes", "127.0.0.1:6379"}, "fencedlock chaos: --nodes takes a count of nodes to start (e.g. --nodes 5), " +
			"not addresses; chaos always starts its own nodes (--backend process or docker); to check nodes of your own, " +
			"use 'fencedlock doctor --nodes ADDRS'\nTry 'fencedlock chaos --help'.\n"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			argv := helper(t, append([]string{"fencedlock"}, tc.args...)...)
			cmd := exec.Command(argv[0], argv[1:]...)
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != exitUsage || stderr.String() != tc.want || stdout.Len() > 0 {
				t.Errorf("exit %d (%v), stderr %q, stdout %q; want exit %d, stderr %q", code, err, stderr.String(), stdout.String(), exitUsage, tc.want)
			}
		})
	}
}
