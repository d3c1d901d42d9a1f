package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionText(t *testing.T) {
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	platform := runtime.GOOS + "/" + runtime.GOARCH
	cases := []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"from a checkout", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.0.0-20261206005535-c442940eb09b"},
			Settings: vcs("vcs", "git", "vcs.revision", "c442940eb09b43058bd4bd7a9014b51c3b077279", "vcs.time", "2026-12-06T00:55:35Z",
				"vcs.modified", "false")},
			"fencedlock v0.0.0-20261206005535-c442940eb09b go1.26.8 " + platform + "\n" +
				"revision: c442940eb09b43058bd4bd7a9014b51c3b077279\ncommit time: 2026-12-06T00:55:35Z\n"},
		{"modified", &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
			Settings: vcs("vcs.revision", "c442940e", "vcs.time", "2026-12-06T00:55:35Z", "vcs.modified", "true")},
			"fencedlock (devel) go1.26.8 " + platform + "\n" +
				"revision: c442940e (modified: built with uncommitted changes)\ncommit time: 2026-12-06T00:55:35Z\n"},
		{"go run or go test", &debug.BuildInfo{GoVersion: "go1.26.8"},
			"fencedlock (devel) go1.26.8 " + platform + "\nrevision: unknown (built without version control information: " +
				"by go run or go test, with -buildvcs=false, or outside a checkout)\n"},
		{"no build information", nil, "fencedlock (unknown version) " + runtime.Version() + "\nno build information in this binary\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := versionText(tc.bi); got != tc.want {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}

// TestVersionOfBuild: a binary built with -buildvcs=true from a git checkout
// prints the checkout's revision.
func TestVersionOfBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root, err := exec.Command(git, "rev-parse", "--show-toplevel").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	dir := strings.TrimSpace(string(root))
	// go build records version control information only where .git is a
	// directory: not in a worktree, whose .git is a file.
	if fi, err := os.Stat(filepath.Join(dir, ".git")); err != nil || !fi.IsDir() {
		t.Skipf("%s/.git is not a directory (a git worktree): go build records no version control information there", dir)
	}
	rev, err := exec.Command(git, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "fencedlock")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, "./cmd/fencedlock")
	build.Dir = dir
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil {
		t.Fatalf("fencedlock version: %v\n%s", err, out)
	}
	if want := "revision: " + strings.TrimSpace(string(rev)); !strings.Contains(string(out), want) {
		t.Errorf("fencedlock version printed\n%s\nwant a line %q", out, want)
	}
	if !strings.Contains(string(out), "commit time: ") {
		t.Errorf("fencedlock version printed no commit time:\n%s", out)
	}
}
