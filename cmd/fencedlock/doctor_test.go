package main

import (
	"encoding/json"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fencedlock/fencedlock/internal/doctor"
	"github.com/fencedlock/fencedlock/internal/redisproc"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

// doctorReport is what `doctor --json` prints.
type doctorReport struct {
	TTLMs            float64          `json:"ttl_ms"`
	DriftAllowanceMs float64          `json:"drift_allowance_ms"`
	NodeTimeoutMs    float64          `json:"node_timeout_ms"`
	Findings         []doctor.Finding `json:"findings"`
	Unreachable      []string         `json:"unreachable"`
}

func runDoctorJSON(t *testing.T, args ...string) (doctorReport, result) {
	t.Helper()
	r := call(t.Context(), append([]string{"doctor", "--json"}, args...)...)
	var rep doctorReport
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
		t.Fatalf("exit %d, stdout not JSON (%v): %q; stderr %q", r.code, err, r.stdout, r.stderr)
	}
	return rep, r
}

// finding returns the finding of check on node ("" for the set).
func (rep doctorReport) finding(t *testing.T, node, check string) doctor.Finding {
	t.Helper()
	for _, f := range rep.Findings {
		if f.Node == node && f.Check == check {
			return f
		}
	}
	t.Fatalf("no %s finding for node %q in %+v", check, node, rep.Findings)
	return doctor.Finding{}
}

// faketimeLib is where Debian (or a source install) puts libfaketime, as
// chaos/internal/faketime looks for it; "" when it is missing.
func faketimeLib() string {
	for _, g := range []string{"/usr/lib/*/faketime/libfaketime.so.1", "/usr/lib/faketime/libfaketime.so.1",
		"/usr/lib64/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1"} {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// closedAddr is a loopback address nothing listens on.
func closedAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr
}

// TestDoctor runs doctor on two well-configured nodes plus one configured
// wrong on purpose, and checks the finding about it and the exit status.
func TestDoctor(t *testing.T) {
	good := redistest.StartN(t, 2, redistest.WithAOF())
	aof := redistest.WithAOF()

	primary := redistest.Start(t, aof)
	replica := redistest.Start(t, aof, redistest.WithArgs("--replicaof", "127.0.0.1", strconv.Itoa(primary.Port())))
	prdb := redistest.Client(t, primary)
	waitFor(t, 10*time.Second, "the replica to connect", func() bool {
		s, _ := prdb.Info(t.Context(), "replication").Result()
		return strings.Contains(s, "connected_slaves:1")
	})
	noAOF := redistest.Start(t)
	allkeys := redistest.Start(t, aof, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "allkeys-lru"))
	volatile := redistest.Start(t, aof, redistest.WithArgs("--maxmemory", "100mb", "--maxmemory-policy", "volatile-lru"))
	volatileNoLimit := redistest.Start(t, aof, redistest.WithArgs("--maxmemory-policy", "volatile-lru"))
	acl := redistest.Start(t, aof, redistest.WithArgs("--user", "locker", "on", ">secret", "~*", "&*", "+@all", "-zadd"))
	aclURL := "redis://locker:secret@" + acl.Addr()
	// Redis 7 gives a new user no channel unless told (acl-pubsub-default resetchannels).
	noChannels := redistest.Start(t, aof, redistest.WithArgs("--user", "locker", "on", ">secret", "~*", "+@all"))
	noChannelsURL := "redis://locker:secret@" + noChannels.Addr()
	noEvalsha := redistest.Start(t, aof, redistest.WithArgs("--user", "locker", "on", ">secret", "~*", "&*", "+@all", "-evalsha"))
	noEvalshaURL := "redis://locker:secret@" + noEvalsha.Addr()
	unreachable := closedAddr(t)

	cases := []struct {
		name   string
		bad    string // the node under test, before the two good ones ("" for none)
		extra  []string
		node   string // the finding's node; "" for the set
		check  string
		status doctor.Status
		words  []string // in the finding's reason
		code   int
	}{
		{"all ok", "", nil, good[0].Addr(), "scripting", doctor.OK, []string{"Redis ", "EVAL and EVALSHA work", "compare-and-delete"}, exitOK},
		{"replica", replica.Addr(), nil, replica.Addr(), "role", doctor.Warn, []string{"a replica of", strconv.Itoa(primary.Port())}, exitFailure},
		{"primary with a replica", primary.Addr(), nil, primary.Addr(), "role", doctor.Warn, []string{"1 connected replica", "failover can lose grants"}, exitFailure},
		{"primary with a replica the lock waits for", primary.Addr(), []string{"--replica-acks", "1"}, primary.Addr(), "role", doctor.OK, []string{"waits for 1"}, exitDoctorFail}, // the good nodes have no replica to wait for
		{"primary with a replica, hz too low for the node timeout", primary.Addr(), []string{"--replica-acks", "1", "--ttl", "1s"}, primary.Addr(), "role", doctor.Warn, []string{"hz 10", "node timeout 50ms"}, exitDoctorFail},
		{"primary with fewer replicas than acks", primary.Addr(), []string{"--replica-acks", "2"}, primary.Addr(), "role", doctor.Fail, []string{"1 connected replica", "every grant on it fails"}, exitDoctorFail},
		{"no AOF", noAOF.Addr(), nil, noAOF.Addr(), "persistence", doctor.Warn, []string{"appendonly no", "amnesia"}, exitFailure},
		{"allkeys-lru", allkeys.Addr(), nil, allkeys.Addr(), "eviction", doctor.Fail, []string{"allkeys-lru", "evict fence counters"}, exitDoctorFail},
		{"volatile-lru with maxmemory", volatile.Addr(), nil, volatile.Addr(), "eviction", doctor.Warn, []string{"volatile-lru", "evicts lock keys"}, exitFailure},
		{"volatile-lru without maxmemory", volatileNoLimit.Addr(), nil, volatileNoLimit.Addr(), "eviction", doctor.OK, []string{"maxmemory 0"}, exitOK},
		{"ACL user lacking ZADD", aclURL, nil, acl.Addr(), "acl", doctor.Fail, []string{"may not run ZADD"}, exitDoctorFail},
		{"ACL user without the release channel", noChannelsURL, nil, noChannels.Addr(), "acl", doctor.Fail, []string{"SUBSCRIBE on channel fencedlock:released:*", "PUBLISH on channel"}, exitDoctorFail},
		{"ACL user lacking EVALSHA: scripting", noEvalshaURL, nil, noEvalsha.Addr(), "scripting", doctor.Fail, []string{"EVALSHA failed", "NOPERM"}, exitDoctorFail},
		{"ACL user lacking EVALSHA: acl", noEvalshaURL, nil, noEvalsha.Addr(), "acl", doctor.Fail, []string{"may not run EVALSHA"}, exitDoctorFail},
		{"same server twice", "localhost:" + strconv.Itoa(good[0].Port()), nil, "", "role", doctor.Fail, []string{"same server", "run_id"}, exitDoctorFail},
		{"unreachable", unreachable, nil, unreachable, "reach", doctor.Fail, []string{"unreachable", "connection refused"}, exitUnavailable},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var nodes []string
			if tc.bad != "" {
				nodes = append(nodes, tc.bad)
			}
			for _, p := range good {
				nodes = append(nodes, p.Addr())
			}
			if tc.bad == "" { // all ok: three good nodes
				nodes = append(nodes, primaryless(t).Addr())
			}
			rep, r := runDoctorJSON(t, append([]string{"--nodes", strings.Join(nodes, ",")}, tc.extra...)...)
			f := rep.finding(t, tc.node, tc.check)
			if f.Status != tc.status {
				t.Errorf("%s: status %v, want %v: %s", tc.check, f.Status, tc.status, f.Reason)
			}
			for _, w := range tc.words {
				if !strings.Contains(f.Reason, w) {
					t.Errorf("%s: reason %q lacks %q", tc.check, f.Reason, w)
				}
			}
			if f.Status != doctor.OK && f.Fix == "" {
				t.Errorf("%s: no fix", tc.check)
			}
			if r.code != tc.code {
				t.Errorf("exit %d, want %d; findings:\n%s", r.code, tc.code, r.stdout)
			}
			if tc.bad == "" {
				for _, f := range rep.Findings {
					if f.Status != doctor.OK {
						t.Errorf("finding %+v is not ok", f)
					}
				}
			}
		})
	}
}

// primaryless starts one more well-configured node.
func primaryless(t *testing.T) *redisproc.Proc {
	t.Helper()
	return redistest.Start(t, redistest.WithAOF())
}

// TestDoctorClock runs a node on a clock skewed by libfaketime.
func TestDoctorClock(t *testing.T) {
	lib := faketimeLib()
	if lib == "" {
		t.Skip("libfaketime is not installed (scripts/deps.sh demo installs it): the clock check needs a skewed server")
	}
	good := redistest.StartN(t, 2, redistest.WithAOF())
	env := func(spec string) redistest.Option {
		// As chaos/internal/faketime Env: glibc's malloc after libfaketime
		// (jemalloc would recurse into it), and the monotonic clock real.
		return redistest.WithEnv("LD_PRELOAD="+lib+" libc.so.6", "FAKETIME="+spec, "FAKETIME_DONT_FAKE_MONOTONIC=1")
	}
	cases := []struct {
		name, spec string
		status     doctor.Status
		words      []string
		code       int
	}{
		{"offset", "+30s", doctor.Warn, []string{"ahead of this machine's by 30", "not kept in step"}, exitFailure},
		{"fast", "+0 x1.5", doctor.Fail, []string{"runs fast", "mutual exclusion breaks"}, exitDoctorFail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			skewed := redistest.Start(t, redistest.WithAOF(), env(tc.spec))
			nodes := skewed.Addr() + "," + good[0].Addr() + "," + good[1].Addr()
			rep, r := runDoctorJSON(t, "--nodes", nodes)
			f := rep.finding(t, skewed.Addr(), "clock")
			if f.Status != tc.status {
				t.Errorf("clock: status %v, want %v: %s", f.Status, tc.status, f.Reason)
			}
			for _, w := range tc.words {
				if !strings.Contains(f.Reason, w) {
					t.Errorf("clock: reason %q lacks %q", f.Reason, w)
				}
			}
			if r.code != tc.code {
				t.Errorf("exit %d, want %d", r.code, tc.code)
			}
			for _, p := range good {
				if g := rep.finding(t, p.Addr(), "clock"); g.Status != doctor.OK {
					t.Errorf("good node %s: clock %v: %s", p.Addr(), g.Status, g.Reason)
				}
			}
		})
	}
}

func TestDoctorUsage(t *testing.T) {
	cases := []struct {
		name string
		args []string
		msg  string
	}{
		{"no --nodes", nil, "--nodes is required"},
		{"bad ttl", []string{"--nodes", "127.0.0.1:1", "--ttl", "0s"}, "--ttl 0s is not positive"},
		{"ttl too short", []string{"--nodes", "127.0.0.1:1", "--ttl", "2ms"}, "--ttl 2ms leaves no validity"},
		{"negative acks", []string{"--nodes", "127.0.0.1:1", "--replica-acks", "-1"}, "--replica-acks -1 is negative"},
		{"bad node", []string{"--nodes", "127.0.0.1"}, "--nodes: node \"127.0.0.1\" is not host:port"},
		{"unknown flag", []string{"--bogus"}, "unknown flag --bogus"},
		{"extra argument", []string{"--nodes", "127.0.0.1:1", "extra"}, "unexpected arguments: extra"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := call(t.Context(), append([]string{"doctor"}, tc.args...)...)
			if r.code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %q", r.code, exitUsage, r.stderr)
			}
			lines := strings.Split(strings.TrimSuffix(r.stderr, "\n"), "\n")
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "fencedlock doctor: ") || !strings.Contains(lines[0], tc.msg) ||
				lines[1] != "Try 'fencedlock doctor --help'." {
				t.Errorf("stderr %q, want one line with %q and the hint", r.stderr, tc.msg)
			}
			if r.stdout != "" {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
}

// TestDoctorTable checks the table output and the warning for fewer than
// three nodes.
func TestDoctorTable(t *testing.T) {
	p := redistest.Start(t, redistest.WithAOF())
	r := call(t.Context(), "doctor", "--nodes", p.Addr())
	if r.code != exitFailure {
		t.Errorf("exit %d, want %d (a warning)", r.code, exitFailure)
	}
	for _, want := range []string{"NODE", p.Addr() + "  persistence  ok", "(all)", "quorum       warn", "nothing is fault tolerant", "fix: "} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
}

// slowProxy forwards loopback connections to upstream, holding each chunk
// of the server's replies for delay: a node that far away, which a real
// server on loopback is not.
func slowProxy(t *testing.T, upstream string, delay time.Duration) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex // protects conns, closed
		conns  []net.Conn
		closed bool
	)
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		closed = true
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", upstream)
			if err != nil {
				_ = client.Close()
				continue
			}
			mu.Lock()
			conns = append(conns, client, server)
			if closed { // the test ended between Accept and here
				_ = client.Close()
				_ = server.Close()
			}
			mu.Unlock()
			wg.Go(func() { _, _ = io.Copy(server, client) })
			wg.Go(func() {
				buf := make([]byte, 64<<10)
				for {
					n, err := server.Read(buf)
					if err != nil {
						_ = client.Close()
						return
					}
					time.Sleep(delay) // the reply's way back
					if _, err := client.Write(buf[:n]); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// TestDoctorLatency: a node whose replies take twice the node timeout that
// --ttl implies fails the latency check, with a recommendation.
func TestDoctorLatency(t *testing.T) {
	good := redistest.StartN(t, 2, redistest.WithAOF())
	const ttl = 100 * time.Millisecond // node timeout: ttl/20 = 5ms
	far := slowProxy(t, redistest.Start(t, redistest.WithAOF()).Addr(), 2*5*time.Millisecond)
	rep, r := runDoctorJSON(t, "--ttl", ttl.String(), "--nodes", far+","+good[0].Addr()+","+good[1].Addr())
	f := rep.finding(t, far, "latency")
	if f.Status != doctor.Fail || !strings.Contains(f.Reason, "node timeout 5ms") || !strings.Contains(f.Reason, "most calls to the node time out") {
		t.Errorf("latency: %v: %s", f.Status, f.Reason)
	}
	if !strings.Contains(f.Fix, "--ttl of at least") {
		t.Errorf("latency fix %q recommends no ttl", f.Fix)
	}
	if r.code != exitDoctorFail {
		t.Errorf("exit %d, want %d", r.code, exitDoctorFail)
	}
}
