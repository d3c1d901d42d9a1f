package main

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// statusRows parses the table: node address → columns.
func statusRows(t *testing.T, stdout string) map[string][]string {
	t.Helper()
	rows := make(map[string][]string)
	lines := strings.Split(stdout, "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "NODE ") {
		t.Fatalf("no table header in %q", stdout)
	}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) >= 5 && strings.Contains(f[0], ":") && !strings.HasSuffix(f[0], ":") {
			rows[f[0]] = f
		}
	}
	return rows
}

// quorumLine is the table's "quorum:" line.
func quorumLineOf(t *testing.T, stdout string) string {
	t.Helper()
	for line := range strings.Lines(stdout) {
		if strings.HasPrefix(line, "quorum: ") {
			return strings.TrimSpace(line)
		}
	}
	t.Fatalf("no quorum line in %q", stdout)
	return ""
}

func TestStatus(t *testing.T) {
	c := newCluster(t, 3)
	const key = "job:status"
	status := func(t *testing.T, extra ...string) result {
		t.Helper()
		return call(t.Context(), append([]string{"status", "--nodes", c.nodes(), "--key", key}, extra...)...)
	}

	t.Run("free", func(t *testing.T) {
		r := status(t)
		if r.code != exitNotHeld {
			t.Fatalf("exit %d, want %d (not held); stderr %q", r.code, exitNotHeld, r.stderr)
		}
		if got := quorumLineOf(t, r.stdout); got != "quorum: not held" {
			t.Errorf("quorum line %q", got)
		}
		for _, p := range c.procs {
			if row := statusRows(t, r.stdout)[p.Addr()]; strings.Join(row[1:], " ") != "- - 0 ok" {
				t.Errorf("row %q", row)
			}
		}
	})

	held, err := c.locker(t).TryLock(t.Context(), key, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// TryLock returns at quorum; the last grant may still be on the wire.
	waitFor(t, 5*time.Second, "the grant on every node", func() bool { return c.holders(t, key) == 3 })
	token := strconv.FormatUint(held.Token(), 10)

	t.Run("held", func(t *testing.T) {
		r := status(t)
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		rows := statusRows(t, r.stdout)
		for _, p := range c.procs {
			row := rows[p.Addr()]
			if len(row) != 5 || row[1] != held.Value() || row[3] != token || row[4] != "ok" {
				t.Errorf("row %q, want holder %s, fence %s", row, held.Value(), token)
				continue
			}
			if d, err := time.ParseDuration(row[2]); err != nil || d <= 0 || d > 30*time.Second {
				t.Errorf("PTTL %q, want in (0, 30s]", row[2])
			}
		}
		want := fmt.Sprintf("quorum: held by %s on 3/3 nodes (quorum 2), token range %s..%s", held.Value(), token, token)
		if got := quorumLineOf(t, r.stdout); got != want {
			t.Errorf("quorum line\n%q, want\n%q", got, want)
		}
	})

	t.Run("json", func(t *testing.T) {
		r := status(t, "--json")
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		var rep statusReport
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("%v in %q", err, r.stdout)
		}
		q := rep.Quorum
		if q.State != "held" || q.Holder != held.Value() || q.Holders != 3 || q.Need != 2 ||
			q.TokenMin == nil || *q.TokenMin != held.Token() || *q.TokenMax != held.Token() {
			t.Errorf("quorum %+v", q)
		}
		if len(rep.Nodes) != 3 {
			t.Fatalf("%d nodes", len(rep.Nodes))
		}
		for _, n := range rep.Nodes {
			if n.Holder == nil || *n.Holder != held.Value() || n.PTTLMs == nil || *n.PTTLMs <= 0 ||
				n.Fence == nil || *n.Fence != held.Token() || n.Error != "" {
				t.Errorf("node %+v", n)
			}
		}
	})

	t.Run("one node down", func(t *testing.T) {
		_ = c.procs[2].Kill()
		r := status(t)
		if r.code != 0 {
			t.Fatalf("exit %d, stderr %q", r.code, r.stderr)
		}
		row := statusRows(t, r.stdout)[c.procs[2].Addr()]
		if got := strings.Join(row[1:], " "); got != "? ? ? connection refused" {
			t.Errorf("dead node's row %q", row)
		}
		want := fmt.Sprintf("quorum: held by %s on 2/3 nodes (quorum 2)", held.Value())
		if got := quorumLineOf(t, r.stdout); !strings.HasPrefix(got, want) {
			t.Errorf("quorum line\n%q, want\n%q...", got, want)
		}
	})

	t.Run("held on a minority, the rest down", func(t *testing.T) {
		_ = c.procs[1].Kill()
		r := status(t)
		if r.code != exitUnavailable {
			t.Fatalf("exit %d, want %d (unknown); stderr %q", r.code, exitUnavailable, r.stderr)
		}
		want := fmt.Sprintf("quorum: unknown: %s on 1/3 nodes (quorum 2), 2 nodes did not answer", held.Value())
		if got := quorumLineOf(t, r.stdout); got != want {
			t.Errorf("quorum line\n%q, want\n%q", got, want)
		}
	})

	t.Run("all nodes down", func(t *testing.T) {
		for _, p := range c.procs {
			_ = p.Kill()
		}
		r := status(t)
		if r.code != exitUnavailable {
			t.Fatalf("exit %d, want %d; stderr %q", r.code, exitUnavailable, r.stderr)
		}
		for _, p := range c.procs {
			if want := "node " + p.Addr() + ": connection refused"; !strings.Contains(r.stderr, want) {
				t.Errorf("stderr %q lacks %q", r.stderr, want)
			}
		}
		if r.elapsed > 3*time.Second {
			t.Errorf("took %v: dead nodes must fail fast", r.elapsed)
		}
	})
}

func TestSummarize(t *testing.T) {
	str := func(s string) *string { return &s }
	num := func(n uint64) *uint64 { return &n }
	up := func(holder *string, fence uint64) nodeStatus { return nodeStatus{Holder: holder, Fence: num(fence)} }
	down := nodeStatus{Error: "connection refused"}
	cases := []struct {
		name  string
		nodes []nodeStatus
		want  string
	}{
		{"free", []nodeStatus{up(nil, 1), up(nil, 1), up(nil, 1)}, "quorum: not held"},
		{"held, counters apart", []nodeStatus{up(str("a"), 7), up(str("a"), 5), up(nil, 7)},
			"quorum: held by a on 2/3 nodes (quorum 2), token range 5..7"},
		{"a grant left on a minority", []nodeStatus{up(str("a"), 3), up(nil, 3), up(nil, 3)},
			"quorum: not held: a on only 1/3 nodes (quorum 2)"},
		{"split between two values", []nodeStatus{up(str("b"), 3), up(str("a"), 3), up(nil, 3), up(nil, 3), up(nil, 3)},
			"quorum: not held: a on only 1/5 nodes (quorum 3)"},
		{"one holder, one node down", []nodeStatus{up(str("a"), 3), up(nil, 3), down},
			"quorum: unknown: a on 1/3 nodes (quorum 2), 1 node did not answer"},
		{"free on the nodes that answered", []nodeStatus{up(nil, 3), down, down},
			"quorum: unknown: no holder on the 1 node that answered, 2 did not (quorum 2)"},
		{"no node answered", []nodeStatus{down, down, down}, "quorum: unknown: no node answered"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := statusReport{Nodes: tc.nodes}
			rep.Quorum = summarize(rep.Nodes)
			if got := quorumLine(&rep); got != tc.want {
				t.Errorf("got\n%q, want\n%q", got, tc.want)
			}
		})
	}
}
