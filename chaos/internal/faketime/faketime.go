package faketime

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Find returns the path of libfaketime.so.1, or "" if it is missing.
// It looks where Debian and a source install put it, globbing the
// architecture directory rather than writing it out.
func Find() string {
	for _, g := range []string{
		"/usr/lib/*/faketime/libfaketime.so.1",
		"/usr/lib/faketime/libfaketime.so.1",
		"/usr/lib64/faketime/libfaketime.so.1",
		"/usr/local/lib/faketime/libfaketime.so.1",
	} {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return m[0]
		}
	}
	return ""
}

// Env is the environment that runs redis-server on a fake wall clock.
//
//   - LD_PRELOAD lists glibc after libfaketime. Debian's redis-server links
//     jemalloc, and jemalloc's initialisation calls clock_gettime, which
//     libfaketime intercepts before it is initialised; libfaketime's own
//     initialisation allocates (through dlsym), re-entering jemalloc: the
//     server hangs at start ("Unexpected recursive calls to clock_gettime()",
//     a known, unfixed libfaketime/jemalloc clash). With glibc preloaded,
//     malloc and free resolve to glibc for the whole process and the cycle
//     is gone; jemalloc is left with only its statistics calls. glibc must
//     come after libfaketime, whose dlsym(RTLD_NEXT) must still find the
//     real clock functions.
//   - FAKETIME_DONT_FAKE_MONOTONIC: Redis 7 expires keys by the wall clock
//     (mstime, from gettimeofday); the monotonic clock drives its event loop
//     and client timeouts, which are left real.
func Env(lib, spec string) []string {
	return []string{
		"LD_PRELOAD=" + lib + " libc.so.6",
		"FAKETIME=" + spec,
		"FAKETIME_DONT_FAKE_MONOTONIC=1",
	}
}

// CheckSpec rejects what libfaketime would not read as a relative or
// absolute time ("+30s", "-1h", "+0 x2", "@2026-01-01 00:00:00").
func CheckSpec(spec string) error {
	if strings.ContainsAny(spec, "\x00\n\r") || strings.TrimSpace(spec) != spec {
		return fmt.Errorf("clock skew %q: stray whitespace or control characters", spec)
	}
	if !strings.ContainsRune("+-@0123456789", rune(spec[0])) {
		return fmt.Errorf("clock skew %q: want libfaketime's FAKETIME syntax, e.g. \"+30s\" or \"+0 x2\"", spec)
	}
	return nil
}
