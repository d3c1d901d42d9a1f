package history

import (
	"bytes"
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
