package examplenodes_test

import (
	"slices"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/internal/examplenodes"
	"github.com/fencedlock/fencedlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseAddrs(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: "127.0.0.1:6379", want: []string{"127.0.0.1:6379"}},
		{in: "a:1, b:2 ,c:3", want: []string{"a:1", "b:2", "c:3"}},
		{in: "[::1]:6379", want: []string{"[::1]:6379"}},
		{in: "localhost", wantErr: true},
		{in: "a:1,,b:2", wantErr: true},
		{in: "a:", wantErr: true},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := examplenodes.ParseAddrs(tc.in)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ParseAddrs(%q) error = %v, want error: %t", tc.in, err, tc.wantErr)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("ParseAddrs(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestOpenStartsLocalNodes(t *testing.T) {
	ns, err := examplenodes.Open(t.Context(), "", 2)
	if err != nil {
		t.Fatal(err)
	}
	if !ns.Local() || len(ns.Procs) != 2 || len(ns.Clients) != 2 || len(ns.Addrs) != 2 {
		t.Fatalf("Open(\"\", 2) = %+v, want 2 local nodes", ns)
	}
	for i, c := range ns.Clients {
		if err := c.Ping(t.Context()).Err(); err != nil {
			t.Errorf("node %d (%s): %v", i, ns.Addrs[i], err)
		}
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	for i, p := range ns.Procs {
		if p.Running() {
			t.Errorf("node %d still running after Close", i)
		}
	}
}

func TestOpenGivenNodes(t *testing.T) {
	procs := redistest.StartN(t, 2)
	flag := procs[0].Addr() + "," + procs[1].Addr()
	ns, err := examplenodes.Open(t.Context(), flag, 3) // n is ignored when addresses are given
	if err != nil {
		t.Fatal(err)
	}
	if ns.Local() || len(ns.Clients) != 2 {
		t.Fatalf("Open(%q) = %+v, want the 2 given nodes, none started", flag, ns)
	}
	if err := ns.Clients[1].Ping(t.Context()).Err(); err != nil {
		t.Error(err)
	}
	if s := ns.String(); !strings.Contains(s, procs[1].Addr()) {
		t.Errorf("String() = %q, want it to name %s", s, procs[1].Addr())
	}
	if err := ns.Close(); err != nil {
		t.Fatal(err)
	}
	if !procs[0].Running() {
		t.Error("Close stopped a node it did not start")
	}
}

func TestOpenRejectsBadInput(t *testing.T) {
	for _, tc := range []struct {
		name  string
		addrs string
		n     int
	}{
		{"bad address", "nohost", 3},
		{"no nodes to start", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if ns, err := examplenodes.Open(t.Context(), tc.addrs, tc.n); err == nil {
				_ = ns.Close()
				t.Fatalf("Open(%q, %d) succeeded", tc.addrs, tc.n)
			}
		})
	}
}
