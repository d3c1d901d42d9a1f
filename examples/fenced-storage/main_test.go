package main

import (
	"bytes"
	"regexp"
	"strconv"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunRejectsTheStaleWrite(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), nil, &out); err != nil {
		t.Fatalf("run: %v\noutput:\n%s", err, &out)
	}
	s := out.String()
	tok1 := regexp.MustCompile(`client1 acquired token=(\d+)`).FindStringSubmatch(s)
	tok2 := regexp.MustCompile(`client2 acquired token=(\d+)`).FindStringSubmatch(s)
	if tok1 == nil || tok2 == nil {
		t.Fatalf("output lacks the two acquisitions:\n%s", s)
	}
	t1, _ := strconv.ParseUint(tok1[1], 10, 64)
	t2, _ := strconv.ParseUint(tok2[1], 10, 64)
	if t1 >= t2 {
		t.Errorf("client2's token %d is not above client1's %d", t2, t1)
	}
	// The order of the story matters: client 2 writes, then client 1 comes
	// back and is refused, and the store keeps only client 2's entry.
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?s)client2 writes with token=` + tok2[1] + `: ok.*client1 resumes after \d+ms.*client1 writes with token=` + tok1[1] + `: REJECTED \(fencing: stale token`),
		regexp.MustCompile(`client1 Unlock: redlock: lock lost`),
		regexp.MustCompile(`stale write rejected: the store kept client2's data\n  report-\w+: token=` + tok2[1] + ` "written by client2"\n$`),
		regexp.MustCompile(`(?m)^t=\+\d+ms +client1 acquired`),
	} {
		if !want.MatchString(s) {
			t.Errorf("output does not match %s:\n%s", want, s)
		}
	}
}
