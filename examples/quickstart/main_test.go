package main

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/fencedlock/fencedlock/redlocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	for _, tc := range []struct {
		name string
		args func(t *testing.T) []string
	}{
		{"local nodes", func(*testing.T) []string { return nil }},
		{"--nodes", func(t *testing.T) []string {
			return []string{"--nodes", strings.Join(redlocktest.Nodes(t, 3).Addrs(), ",")}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := run(t.Context(), tc.args(t), &out); err != nil {
				t.Fatalf("run: %v\noutput:\n%s", err, &out)
			}
			for _, want := range []*regexp.Regexp{
				regexp.MustCompile(`acquired "quickstart:invoice-42" \(quorum 2 of 3 nodes\): token=[1-9]\d* valid for \d`),
				regexp.MustCompile(`second TryLock: .*lock not acquired \(errors.Is ErrNotAcquired: true\)`),
				regexp.MustCompile(`(?m)^released$`),
			} {
				if !want.MatchString(out.String()) {
					t.Errorf("output does not match %s:\n%s", want, &out)
				}
			}
		})
	}
}

func TestRunRejectsBadFlag(t *testing.T) {
	var out bytes.Buffer
	err := run(t.Context(), []string{"--nodes", "nohost"}, &out)
	if err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("run with a bad --nodes: err = %v, want a host:port error", err)
	}
}
