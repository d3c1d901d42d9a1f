package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// tb records what SkipOrFail asks of a test instead of ending it.
type tb struct {
	testing.TB
	fatal, skip string
}

func (t *tb) Helper()                        {}
func (t *tb) Fatalf(format string, a ...any) { t.fatal = fmt.Sprintf(format, a...) }
func (t *tb) Skipf(format string, a ...any)  { t.skip = fmt.Sprintf(format, a...) }

func TestSkipOrFail(t *testing.T) {
	for _, tc := range []struct {
		ci         string
		fail, skip bool
	}{
		{"true", true, false},
		{"", false, true},
		{"false", false, true},
	} {
		t.Setenv("CI", tc.ci)
		var fake tb
		SkipOrFail(&fake, "no %s", "chromium")
		if (fake.fatal != "") != tc.fail || (fake.skip != "") != tc.skip {
			t.Errorf("CI=%q: failed %q, skipped %q; want fail %v, skip %v", tc.ci, fake.fatal, fake.skip, tc.fail, tc.skip)
		}
		if msg := fake.fatal + fake.skip; msg != "" && !strings.Contains(msg, "no chromium") {
			t.Errorf("message %q", msg)
		}
	}
}
