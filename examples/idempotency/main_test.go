package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunShowsAllThreeCases(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), nil, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	want := []string{
		`request #1 order 1001: processing`,
		`request #2 order 1001, concurrent duplicate: 409 in progress`,
		`request #1 order 1001: 201 processed, result "charge ch_1001_1"`,
		`request #3 order 1001, repeated after completion: 200 stored result "charge ch_1001_1" (not processed again)`,
		`payment provider charged 1 time(s)`,
	}
	// In this order, each once.
	s := out.String()
	for _, w := range want {
		i := strings.Index(s, w)
		if i < 0 {
			t.Fatalf("output lacks %q (or has it out of order):\n%s", w, &out)
		}
		s = s[i+len(w):]
	}
}
