package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunLimitsWithinTheWindow(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), nil, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	s := out.String()
	var want []string
	for i := 1; i <= 5; i++ {
		want = append(want, fmt.Sprintf("request %d: allowed (%d/5 in this window)", i, i))
	}
	for i := 6; i <= 8; i++ {
		want = append(want, fmt.Sprintf("request %d: limited (429, Retry-After", i))
	}
	want = append(want, "allowed=true (1/5 in the new window)")
	for _, w := range want {
		i := strings.Index(s, w)
		if i < 0 {
			t.Fatalf("output lacks %q (or has it out of order):\n%s", w, &out)
		}
		s = s[i+len(w):]
	}
}
