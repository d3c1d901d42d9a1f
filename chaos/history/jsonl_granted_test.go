package history

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestReadGranted checks the acquire's granted nodes: read and written back,
// and refused when they are not distinct node indexes of the run.
func TestReadGranted(t *testing.T) {
	const acquire = `{"kind":"acquire","client":0,"key":"k","invoke_ns":1,"complete_ns":2,"outcome":"ok","token":1%s}`
	for _, tc := range []struct {
		name    string
		run     string
		granted string // the field's JSON, "" for none
		outcome string // replaces the acquire's outcome when set
		want    []int
		err     string // in the error; "" for none
	}{
		{name: "absent", run: `{"kind":"run","nodes":3}`},
		{name: "quorum", run: `{"kind":"run","nodes":3}`, granted: `[2,0]`, want: []int{2, 0}},
		{name: "out of range", run: `{"kind":"run","nodes":3}`, granted: `[0,3]`, err: "not below"},
		{name: "negative", run: `{"kind":"run","nodes":3}`, granted: `[-1,0]`, err: "not a node index"},
		{name: "twice", run: `{"kind":"run","nodes":3}`, granted: `[1,1]`, err: "listed twice"},
		{name: "empty", run: `{"kind":"run","nodes":3}`, granted: `[]`, err: "empty"},
		{name: "not a list", run: `{"kind":"run","nodes":3}`, granted: `"0,1"`, err: "want a list"},
		{name: "no node count", granted: `[0,1]`, err: "node count"},
		{name: "failed acquire", run: `{"kind":"run","nodes":3}`, granted: `[0,1]`, outcome: "failed", err: "did not succeed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := acquire
			if tc.granted != "" {
				line = strings.Replace(line, "%s", `,"granted":`+tc.granted, 1)
			} else {
				line = strings.Replace(line, "%s", "", 1)
			}
			if tc.outcome != "" {
				line = strings.Replace(line, `"outcome":"ok","token":1`, `"outcome":"`+tc.outcome+`"`, 1)
			}
			h, err := ReadJSONL(strings.NewReader(tc.run + "\n" + line + "\n"))
			var le *LineError
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &le) || le.Field != "granted"):
				t.Fatalf("err %v, want one about granted saying %q", err, tc.err)
			case tc.err != "":
				return
			case err != nil:
				t.Fatal(err)
			}
			if got := h.Ops[0].Granted; !slices.Equal(got, tc.want) {
				t.Fatalf("granted %v, want %v", got, tc.want)
			}
			var buf bytes.Buffer
			if err := WriteJSONL(&buf, h); err != nil {
				t.Fatal(err)
			}
			back, err := ReadJSONL(&buf)
			if err != nil || !slices.Equal(back.Ops[0].Granted, tc.want) {
				t.Fatalf("written and read back: granted %v (%v), want %v", back.Ops[0].Granted, err, tc.want)
			}
		})
	}
}

// TestReadReacquired checks an extend's re-created nodes: read and written
// back, a node listed twice included, and refused when they are not node
// indexes of the run, or on a line that is not an extend that returned.
func TestReadReacquired(t *testing.T) {
	const acquire = `{"kind":"acquire","client":0,"key":"k","invoke_ns":1,"complete_ns":2,"outcome":"ok","token":1}`
	const extend = `{"kind":"extend","client":0,"key":"k","invoke_ns":3,"complete_ns":4,"outcome":"ok","token":1%s}`
	const run = `{"kind":"run","nodes":3}`
	for _, tc := range []struct {
		name  string
		run   string
		field string // the reacquired field's JSON, "" for none
		line  string // the line that carries it; default extend
		want  []int
		err   string // in the error; "" for none
	}{
		{name: "absent", run: run},
		{name: "nodes", run: run, field: `[2,0]`, want: []int{2, 0}},
		{name: "a node twice", run: run, field: `[1,1]`, want: []int{1, 1}},
		{name: "extend refused", run: run, field: `[1]`, want: []int{1},
			line: strings.Replace(extend, `"outcome":"ok"`, `"outcome":"lost"`, 1)},
		{name: "out of range", run: run, field: `[0,3]`, err: "not below"},
		{name: "negative", run: run, field: `[-1]`, err: "not a node index"},
		{name: "empty", run: run, field: `[]`, err: "empty"},
		{name: "not a list", run: run, field: `"0"`, err: "want a list"},
		{name: "no node count", field: `[0]`, err: "node count"},
		{name: "never returned", run: run, field: `[0]`, err: "never returned",
			line: `{"kind":"extend","client":0,"key":"k","invoke_ns":3,"token":1%s}`},
		{name: "on an acquire", run: run, field: `[0]`, err: "not a field",
			line: `{"kind":"acquire","client":0,"key":"k","invoke_ns":3,"complete_ns":4,"outcome":"ok","token":2%s}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			line := cmp.Or(tc.line, extend)
			field := ""
			if tc.field != "" {
				field = `,"reacquired":` + tc.field
			}
			line = strings.Replace(line, "%s", field, 1)
			h, err := ReadJSONL(strings.NewReader(tc.run + "\n" + acquire + "\n" + line + "\n"))
			var le *LineError
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err) || !errors.As(err, &le) || le.Field != "reacquired"):
				t.Fatalf("err %v, want one about reacquired saying %q", err, tc.err)
			case tc.err != "":
				return
			case err != nil:
				t.Fatal(err)
			}
			if got := h.Ops[1].Reacquired; !slices.Equal(got, tc.want) {
				t.Fatalf("reacquired %v, want %v", got, tc.want)
			}
			var buf bytes.Buffer
			if err := WriteJSONL(&buf, h); err != nil {
				t.Fatal(err)
			}
			back, err := ReadJSONL(&buf)
			if err != nil || !slices.Equal(back.Ops[1].Reacquired, tc.want) {
				t.Fatalf("written and read back: reacquired %v (%v), want %v", back.Ops[1].Reacquired, err, tc.want)
			}
		})
	}
}

// A history built in memory records re-creates on extends alone, on nodes
// of the run.
func TestValidateReacquired(t *testing.T) {
	base := func() History {
		return History{Nodes: 3, Ops: []Op{
			{ID: 1, Kind: KindAcquire, Key: "k", Outcome: OK, Token: 1, Complete: 2},
			{ID: 2, Kind: KindExtend, Key: "k", Hold: 1, Outcome: OK, Token: 1, Invoke: 3, Complete: 4, Reacquired: []int{0, 2}},
		}}
	}
	if err := base().Validate(); err != nil {
		t.Fatal(err)
	}
	h := base()
	h.Ops[1].Reacquired = []int{3}
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "node 3") {
		t.Fatalf("node 3 of 3: %v", err)
	}
	h = base()
	h.Ops[0].Reacquired = []int{0}
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "only an extend") {
		t.Fatalf("re-creates on an acquire: %v", err)
	}
}
