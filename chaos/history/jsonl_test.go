package history

import (
	"bytes"
	"cmp"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// A small history of two named clients, written by hand in the format.
const handWritten = `{"kind":"run","version":2,"nodes":3}
{"kind":"acquire","client":"api-1","key":"orders","invoke_ns":1000000000,"complete_ns":1002000000,"outcome":"ok","token":7,"valid_until_ns":1030000000}
{"kind":"acquire","client":"api-2","key":"orders","invoke_ns":1001000000,"complete_ns":1003000000,"outcome":"failed","err":"not acquired"}
{"kind":"write","client":"api-1","key":"orders","invoke_ns":1004000000,"complete_ns":1005000000,"outcome":"ok","token":7,"resource":"orders-db","entry":"o-1"}
{"kind":"release","client":"api-1","key":"orders","invoke_ns":1006000000,"complete_ns":1007000000,"outcome":"ok","token":7}

{"kind":"fault","fault":"kill","node":2,"invoke_ns":1000500000,"complete_ns":1008000000,"outcome":"ok"}
{"kind":"acquire","client":"api-2","key":"orders","invoke_ns":1008000000,"complete_ns":1009000000,"outcome":"ok","token":8,"valid_until_ns":1039000000}
{"kind":"release","client":"api-2","key":"orders","invoke_ns":1010000000,"complete_ns":1011000000,"outcome":"ok","token":8}
{"kind":"store","resource":"orders-db","entries":["o-1"]}
`

func TestReadJSONL(t *testing.T) {
	h, err := ReadJSONL(strings.NewReader(handWritten))
	if err != nil {
		t.Fatal(err)
	}
	ms := func(n float64) time.Duration { return time.Duration(n * float64(time.Millisecond)) }
	want := History{
		Nodes:   3,
		Clients: []string{"api-1", "api-2"},
		End:     ms(11),
		Final:   map[string][]string{"orders-db": {"o-1"}},
		Ops: []Op{
			{ID: 1, Kind: KindAcquire, Client: 0, Key: "orders", Invoke: 0, Complete: ms(2), Outcome: OK, Token: 7, ValidUntil: ms(30)},
			{ID: 2, Kind: KindFault, Fault: "kill", Node: 2, Invoke: ms(0.5), Complete: ms(8), Outcome: OK},
			{ID: 3, Kind: KindAcquire, Client: 1, Key: "orders", Invoke: ms(1), Complete: ms(3), Outcome: Failed, Err: "not acquired"},
			{ID: 4, Kind: KindWrite, Client: 0, Key: "orders", Invoke: ms(4), Complete: ms(5), Outcome: OK, Token: 7, Hold: 1,
				Resource: "orders-db", Entry: "o-1"},
			{ID: 5, Kind: KindRelease, Client: 0, Key: "orders", Invoke: ms(6), Complete: ms(7), Outcome: OK, Token: 7, Hold: 1},
			{ID: 6, Kind: KindAcquire, Client: 1, Key: "orders", Invoke: ms(8), Complete: ms(9), Outcome: OK, Token: 8, ValidUntil: ms(39)},
			{ID: 7, Kind: KindRelease, Client: 1, Key: "orders", Invoke: ms(10), Complete: ms(11), Outcome: OK, Token: 8, Hold: 6},
		},
	}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("read\n%+v\nwant\n%+v", h, want)
	}
	if got := h.ClientName(1); got != "api-2" {
		t.Errorf("ClientName(1) = %q", got)
	}

	// Written back, it reads the same.
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, h); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSONL(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, h) {
		t.Fatalf("round trip:\n%+v\nwant\n%+v", back, h)
	}
}

// Every way a line can be wrong gives a *LineError naming the line and the
// field (none when the line is not an object at all), never a panic, a
// skipped line or a history.
func TestReadJSONLMalformed(t *testing.T) {
	const acq = `{"kind":"acquire","client":0,"key":"k","invoke_ns":10,"complete_ns":20,"outcome":"ok","token":1}`
	for _, tc := range []struct {
		name  string
		lines string // after acq on line 1
		line  int
		field string
		msg   string
	}{
		{"not JSON", `{"kind":"acquire",`, 2, "", "not a JSON object"},
		{"not an object", `[1,2]`, 2, "", "not a JSON object"},
		{"a JSON string", `"acquire"`, 2, "", "not a JSON object"},
		{"no kind", `{"client":0}`, 2, "kind", "missing"},
		{"unknown kind", `{"kind":"grab"}`, 2, "kind", `unknown kind "grab"`},
		{"kind not a string", `{"kind":3}`, 2, "kind", "want a string"},
		{"unknown field", `{"kind":"release","client":0,"key":"k","invoke":30,"token":1}`, 2, "invoke", "not a field of a release line"},
		{"field of another kind", `{"kind":"release","client":0,"key":"k","invoke_ns":30,"token":1,"entry":"x"}`, 2, "entry", "not a field of a release line"},
		{"no client", `{"kind":"release","key":"k","invoke_ns":30,"complete_ns":31,"outcome":"ok","token":1}`, 2, "client", "missing"},
		{"negative client", `{"kind":"release","client":-1,"key":"k","invoke_ns":30,"token":1}`, 2, "client", "want a name or an index"},
		{"client as an object", `{"kind":"release","client":{},"key":"k","invoke_ns":30,"token":1}`, 2, "client", "want a name or an index"},
		{"empty client name", `{"kind":"release","client":"","key":"k","invoke_ns":30,"token":1}`, 2, "client", "empty"},
		{"no key", `{"kind":"release","client":0,"invoke_ns":30,"token":1}`, 2, "key", "missing"},
		{"no invoke", `{"kind":"release","client":0,"key":"k","token":1}`, 2, "invoke_ns", "missing"},
		{"invoke not an integer", `{"kind":"release","client":0,"key":"k","invoke_ns":30.5,"token":1}`, 2, "invoke_ns", "want an integer"},
		{"invoke a string", `{"kind":"release","client":0,"key":"k","invoke_ns":"30","token":1}`, 2, "invoke_ns", "want an integer"},
		{"invoke too big", `{"kind":"release","client":0,"key":"k","invoke_ns":99999999999999999999,"token":1}`, 2, "invoke_ns", "want an integer"},
		{"complete before invoke", `{"kind":"release","client":0,"key":"k","invoke_ns":30,"complete_ns":29,"outcome":"ok","token":1}`, 2, "complete_ns", "before invoke_ns"},
		{"outcome without complete", `{"kind":"release","client":0,"key":"k","invoke_ns":30,"outcome":"ok","token":1}`, 2, "complete_ns", "missing"},
		{"complete without outcome", `{"kind":"release","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"token":1}`, 2, "outcome", "missing"},
		{"unknown outcome", `{"kind":"release","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"maybe","token":1}`, 2, "outcome", `"maybe" is not an outcome of release`},
		{"outcome of another kind", `{"kind":"acquire","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"rejected"}`, 2, "outcome", "not an outcome of acquire"},
		{"acquire ok without token", `{"kind":"acquire","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"ok"}`, 2, "token", "missing"},
		{"token zero", `{"kind":"acquire","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"ok","token":0}`, 2, "token", "tokens start at 1"},
		{"negative token", `{"kind":"release","client":0,"key":"k","invoke_ns":30,"token":-3}`, 2, "token", "want a non-negative integer"},
		{"release without token", `{"kind":"release","client":0,"key":"k","invoke_ns":30}`, 2, "token", "missing"},
		{"validity on a failure", `{"kind":"acquire","client":1,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"failed","valid_until_ns":90}`, 2, "valid_until_ns", "did not succeed"},
		{"validity before invoke", `{"kind":"acquire","client":1,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"ok","token":2,"valid_until_ns":30}`, 2, "valid_until_ns", "not after invoke_ns"},
		{"lost at two times", `{"kind":"lost","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"token":1}`, 2, "complete_ns", "one moment"},
		{"write without entry", `{"kind":"write","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"ok","token":1}`, 2, "entry", "missing"},
		{"write with a negative seq", `{"kind":"write","client":0,"key":"k","invoke_ns":30,"token":1,"entry":"e","seq":-1}`, 2, "seq", "non-negative"},
		{"no such hold", `{"kind":"release","client":0,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"ok","token":2}`, 2, "token", "no successful acquire"},
		{"hold of another client", `{"kind":"release","client":1,"key":"k","invoke_ns":30,"complete_ns":31,"outcome":"ok","token":1}`, 2, "token", "no successful acquire"},
		{"op before its hold returned", `{"kind":"write","client":0,"key":"k","invoke_ns":15,"token":1,"entry":"e"}`, 2, "token", "no successful acquire"},
		{"unknown fault", `{"kind":"fault","fault":"meteor","node":1,"invoke_ns":30}`, 2, "fault", `unknown fault kind "meteor"`},
		{"node fault without node", `{"kind":"fault","fault":"kill","invoke_ns":30}`, 2, "node", "missing"},
		{"node fault on a client", `{"kind":"fault","fault":"kill","client":0,"node":1,"invoke_ns":30}`, 2, "client", "names a node"},
		{"client fault on a node", `{"kind":"fault","fault":"client-pause","node":1,"invoke_ns":30}`, 2, "node", "names a client"},
		{"negative node", `{"kind":"fault","fault":"pause","node":-2,"invoke_ns":30}`, 2, "node", "not a node index"},
		{"store without entries", `{"kind":"store","resource":"r"}`, 2, "entries", "missing"},
		{"store entries not strings", `{"kind":"store","resource":"r","entries":[1]}`, 2, "entries", "list of strings"},
		{"store twice", `{"kind":"store","resource":"r","entries":[]}` + "\n" + `{"kind":"store","resource":"r","entries":[]}`, 3, "resource", "already has a store line (line 2)"},
		{"two run lines that disagree", `{"kind":"run","nodes":3}` + "\n" + `{"kind":"run","nodes":5}`, 3, "nodes", "5, but an earlier run line (line 2) says 3"},
		{"run lines that disagree on the version", `{"kind":"run","version":2}` + "\n" + `{"kind":"run","version":1}`, 3, "version", "earlier run line (line 2) says 2"},
		{"a version too new", `{"kind":"run","version":3}`, 2, "version", "3 is newer than this reader"},
		{"version zero", `{"kind":"run","version":0}`, 2, "version", "not a version"},
		{"negative clock error", `{"kind":"run","clock_error_ns":-1}`, 2, "clock_error_ns", "not a bound"},
		{"zero nodes", `{"kind":"run","nodes":0}`, 2, "nodes", "not a node count"},
		{"end before start", `{"kind":"run","start_ns":5,"end_ns":4}`, 2, "end_ns", "before start_ns"},
		{"op before start", `{"kind":"run","start_ns":15}`, 1, "invoke_ns", "before the start"},
		{"end before the last op", `{"kind":"run","end_ns":15}`, 2, "end_ns", "before the last time"},
		{"too far apart", `{"kind":"release","client":0,"key":"k","invoke_ns":9000000000000000000,"token":1}`, 2, "invoke_ns", "after the start"},
		{"blank lines count", "\n\n" + `{"kind":"nope"}`, 4, "kind", "unknown kind"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := ReadJSONL(strings.NewReader(acq + "\n" + tc.lines + "\n"))
			var le *LineError
			if !errors.As(err, &le) {
				t.Fatalf("ReadJSONL = %+v, %v; want a *LineError", h, err)
			}
			if le.Line != tc.line || le.Field != tc.field || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q (line %d, field %q); want line %d, field %q, and %q", err, le.Line, le.Field, tc.line, tc.field, tc.msg)
			}
			wantPrefix := "history: line "
			if !strings.HasPrefix(err.Error(), wantPrefix) {
				t.Errorf("error %q does not start with %q", err, wantPrefix)
			}
		})
	}
}

// FuzzReadJSONL: whatever the input, ReadJSONL returns a history or an
// error, never panics; a history it returns is valid and survives
// WriteJSONL and ReadJSONL unchanged. The seed corpus (run by every go
// test) is the hand-written history, the recorded histories in testdata,
// and the malformed lines above. (Package checker fuzzes Check on the same
// inputs and its golden histories.)
func FuzzReadJSONL(f *testing.F) {
	f.Add([]byte(handWritten))
	f.Add([]byte(""))
	f.Add([]byte(`{"kind":"lost","client":"a","key":"k","invoke_ns":-5,"token":3}`))
	f.Add([]byte(`{"kind":"acquire","client":"a","key":"k","invoke_ns":-9223372036854775808,"complete_ns":9223372036854775807,"outcome":"ok","token":1,"valid_until_ns":9223372036854775807}`))
	f.Add([]byte(`{"kind":"fault","fault":"client-pause","client":3,"invoke_ns":1}` + "\n" + `{"kind":"run","nodes":1,"start_ns":0}`))
	recorded, _ := filepath.Glob(filepath.Join("testdata", "recorded", "*.jsonl"))
	for _, p := range recorded {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := ReadJSONL(bytes.NewReader(data))
		if err != nil {
			var le *LineError
			if errors.As(err, &le) && le.Line < 1 {
				t.Fatalf("error names line %d: %v", le.Line, err)
			}
			return
		}
		if err := h.Validate(); err != nil {
			t.Fatalf("ReadJSONL returned an invalid history: %v", err)
		}
		var buf bytes.Buffer
		if err := WriteJSONL(&buf, h); err != nil {
			t.Fatal(err)
		}
		back, err := ReadJSONL(&buf)
		if err != nil {
			t.Fatalf("re-reading what WriteJSONL wrote: %v\n%s", err, buf.String())
		}
		if !reflect.DeepEqual(back, h) {
			t.Fatalf("round trip changed the history:\n%+v\n%+v", back, h)
		}
	})
}

// TestParserSort checks that the lines of a recorded history, read in a
// shuffled order, are put in the order of invocation, acquires first, then
// line: the same as sorting the lines themselves.
func TestParserSort(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "recorded", "hunt.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSpace(data), []byte("\n"))
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(lines), func(i, j int) { lines[i], lines[j] = lines[j], lines[i] })
	var p parser
	for i, l := range lines {
		if err := p.line(i+1, l); err != nil {
			t.Fatal(err)
		}
	}
	want := slices.Clone(p.ops)
	slices.SortFunc(want, func(a, b parsed) int {
		return cmp.Or(cmp.Compare(a.op.Invoke, b.op.Invoke), cmp.Compare(rank(a.op.Kind), rank(b.op.Kind)), cmp.Compare(a.n, b.n))
	})
	p.sort()
	if !reflect.DeepEqual(p.ops, want) {
		t.Errorf("sorted lines differ from the lines sorted")
	}
}
