// Package scripts holds the tests of the shell scripts next to them.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestDepsSignalsNoProcessByName: deps.sh must not find processes by name
// and signal them: a pkill -x redis-server kills the user's servers and other
// runs' along with the one a package started.
func TestDepsSignalsNoProcessByName(t *testing.T) {
	b, err := os.ReadFile("deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	signals := regexp.MustCompile(`\b(pkill|killall|pgrep|pidof|kill)\b`)
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if m := signals.FindString(line); m != "" {
			t.Errorf("deps.sh:%d uses %s: %q", i+1, m, strings.TrimSpace(line))
		}
	}
}

// TestDepsStartsAndStopsNoOtherService runs deps.sh as root would, with
// apt-get, service, id and every way to signal by name replaced by stubs
// that record their calls, and redis-server and chromium missing from PATH.
// The stub apt-get acts as a package's postinst does through invoke-rc.d: it
// starts a packaged service unless policy-rc.d answers 101. A real
// redis-server that the test started must outlive the script.
func TestDepsStartsAndStopsNoOtherService(t *testing.T) {
	cases := []struct {
		name     string
		set      string
		policy   string // the machine's policy-rc.d before the run; "" for none
		running  bool   // the redis-server service ran before the install
		want     []string
		may      []string // installed only where this machine lacks them
		stopped  bool     // the script stops the redis-server service by name
		services []string // running after the run
	}{
		{name: "demo: only what the demo uses, no service starts", set: "demo",
			want: []string{"redis-server"}, may: []string{"libfaketime"}},
		{name: "test: the tests' packages too", set: "test",
			want: []string{"redis-server", "chromium"}, may: []string{"libfaketime", "postgresql"}},
		{name: "the machine's policy-rc.d lets it start: stopped by name", set: "demo",
			policy: "#!/bin/sh\nexit 0\n", want: []string{"redis-server"}, may: []string{"libfaketime"}, stopped: true},
		{name: "a service that ran before the install is left alone", set: "demo", running: true,
			policy: "#!/bin/sh\nexit 0\n", want: []string{"redis-server"}, may: []string{"libfaketime"},
			services: []string{"redis-server"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			node := redistest.Start(t)
			env := stubs(t)
			if tc.policy != "" {
				if err := os.WriteFile(env.policy, []byte(tc.policy), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if tc.running {
				env.start(t, "redis-server")
			}
			cmd := exec.CommandContext(t.Context(), env.bash, "deps.sh", tc.set)
			cmd.Env = env.vars
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("deps.sh %s: %v\n%s", tc.set, err, out)
			}
			calls := env.calls(t)
			for _, c := range calls {
				if strings.HasPrefix(c, "pkill") || strings.HasPrefix(c, "killall") {
					t.Errorf("deps.sh ran %q", c)
				}
			}
			installed := installed(calls)
			for _, p := range tc.want {
				if !slices.Contains(installed, p) {
					t.Errorf("installed %v, lacks %s", installed, p)
				}
			}
			for _, p := range installed {
				if !slices.Contains(tc.want, p) && !slices.Contains(tc.may, p) {
					t.Errorf("installed %v: %s is not for %q", installed, p, tc.set)
				}
			}
			if stop := slices.Contains(calls, "service redis-server stop"); stop != tc.stopped {
				t.Errorf("stopped the redis-server service: %v, want %v; calls %q", stop, tc.stopped, calls)
			}
			if got := env.running(t); !slices.Equal(got, tc.services) {
				t.Errorf("services running after the run: %v, want %v", got, tc.services)
			}
			b, err := os.ReadFile(env.policy)
			switch {
			case tc.policy == "" && !os.IsNotExist(err):
				t.Errorf("the script's policy-rc.d is left behind (%v)", err)
			case tc.policy != "" && string(b) != tc.policy:
				t.Errorf("the machine's policy-rc.d changed: %q, %v", b, err)
			}
			if !node.Running() {
				t.Fatal("the redis-server the test started was killed")
			}
			if err := redistest.Client(t, node).Ping(t.Context()).Err(); err != nil {
				t.Errorf("the redis-server the test started does not answer: %v", err)
			}
		})
	}
}

// stubEnv is a PATH of stubs, the state of the services they pretend to run,
// and the log of their calls.
type stubEnv struct {
	bash   string
	policy string // FENCEDLOCK_POLICY_RC_D
	state  string // a file per running service
	log    string
	vars   []string
}

func stubs(t *testing.T) stubEnv {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	e := stubEnv{bash: bash, policy: filepath.Join(dir, "policy-rc.d"), state: filepath.Join(dir, "state"), log: filepath.Join(dir, "log")}
	for _, d := range []string{bin, e.state} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, tool := range []string{"rm", "chmod", "touch"} { // the real ones, which the script and the stubs use
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("no %s", tool)
		}
		if err := os.Symlink(p, filepath.Join(bin, tool)); err != nil {
			t.Fatal(err)
		}
	}
	record := `echo "${0##*/} $*" >>"$STUB_LOG"` + "\n"
	scripts := map[string]string{
		"id":      record + "echo 0\n",
		"pkill":   record + "exit 1\n",
		"killall": record + "exit 1\n",
		"service": record + `case $2 in
status) [[ -e $STUB_STATE/$1 ]] ;;
stop) rm -f "$STUB_STATE/$1" ;;
esac
`,
		// A package's postinst starts its service through invoke-rc.d, which
		// asks policy-rc.d first: 101 forbids the start.
		"apt-get": record + `[[ $1 == install ]] || exit 0
for s in redis-server postgresql; do
	[[ " $* " == *" $s "* ]] || continue
	rc=0
	if [[ -x $FENCEDLOCK_POLICY_RC_D ]]; then "$FENCEDLOCK_POLICY_RC_D" "$s" start || rc=$?; fi
	[[ $rc == 101 ]] || touch "$STUB_STATE/$s"
done
`,
	}
	for name, body := range scripts {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!"+bash+"\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e.vars = []string{"PATH=" + bin, "FENCEDLOCK_POLICY_RC_D=" + e.policy, "STUB_STATE=" + e.state, "STUB_LOG=" + e.log}
	return e
}

// start pretends that service s runs.
func (e stubEnv) start(t *testing.T, s string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(e.state, s), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// running lists the services the stubs pretend run.
func (e stubEnv) running(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(e.state)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range entries {
		out = append(out, d.Name())
	}
	return out
}

// calls is the stubs' log, one call a line.
func (e stubEnv) calls(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(e.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSpace(string(b)), "\n")
}

// installed lists the packages of the apt-get install calls.
func installed(calls []string) []string {
	var out []string
	for _, c := range calls {
		args, ok := strings.CutPrefix(c, "apt-get install ")
		if !ok {
			continue
		}
		for _, a := range strings.Fields(args) {
			if !strings.HasPrefix(a, "-") {
				out = append(out, a)
			}
		}
	}
	return out
}

// TestDepsFindsWhatTheCodeFinds: deps.sh installs a package only where the
// code that uses it would not find it: libfaketime where the chaos package
// looks for it (faketime.Find), a browser by every name the report's
// Screenshot tries.
func TestDepsFindsWhatTheCodeFinds(t *testing.T) {
	script, err := os.ReadFile("deps.sh")
	if err != nil {
		t.Fatal(err)
	}
	find, err := os.ReadFile("../chaos/internal/faketime/faketime.go")
	if err != nil {
		t.Fatal(err)
	}
	lib := regexp.MustCompile(`/usr[^"\s]*/libfaketime\.so\.1`)
	if want, got := lib.FindAllString(string(find), -1), lib.FindAllString(string(script), -1); len(want) == 0 || !slices.Equal(got, want) {
		t.Errorf("deps.sh looks for libfaketime in %q, faketime.Find in %q", got, want)
	}
	shot, err := os.ReadFile("../chaos/report/screenshot.go")
	if err != nil {
		t.Fatal(err)
	}
	list := regexp.MustCompile(`var browsers = \[\]string\{(.*)\}`).FindSubmatch(shot)
	if list == nil {
		t.Fatal("no browsers list in chaos/report/screenshot.go")
	}
	for _, name := range regexp.MustCompile(`"([^"]+)"`).FindAllSubmatch(list[1], -1) {
		t.Run(string(name[1]), func(t *testing.T) {
			env := stubs(t)
			bin := filepath.Join(filepath.Dir(env.log), "bin", string(name[1]))
			if err := os.WriteFile(bin, []byte("#!"+env.bash+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), env.bash, "deps.sh", "test")
			cmd.Env = env.vars
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("deps.sh test: %v\n%s", err, out)
			}
			if got := installed(env.calls(t)); slices.Contains(got, "chromium") {
				t.Errorf("with %s on PATH, deps.sh installed %v", name[1], got)
			}
		})
	}
}
