package mutants

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ModuleRoot returns the root of the module that holds dir: the nearest
// directory at or above it with a go.mod.
func ModuleRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("mutants: no go.mod above the working directory")
		}
		dir = parent
	}
}

// skipped reports whether a directory of the module is one a build of the
// CLI does not need: version control, the benchmarks (a module of their
// own), outputs.
func skipped(name string) bool {
	switch name {
	case ".git", "bench", "bin", "node_modules":
		return true
	}
	return false
}

// copyModule copies the module at root into dst (which exists), leaving out
// the directories a build does not need.
func copyModule(root, dst string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && skipped(d.Name()) && rel != ".":
			return filepath.SkipDir
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case !d.Type().IsRegular():
			return nil // sockets, symlinks: nothing a build reads
		}
		return copyFile(path, target)
	})
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Build copies the module at root into a new directory under tmp, applies m
// there (unless m is the zero Mutant: the module as it is) and builds the CLI
// into that directory. It returns the binary's path; the directory is the
// caller's to remove.
func Build(ctx context.Context, root, tmp string, m Mutant) (string, error) {
	name := m.Name
	if name == "" {
		name = "original"
	}
	dir, err := os.MkdirTemp(tmp, name+"-")
	if err != nil {
		return "", err
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return "", err
	}
	if err := copyModule(root, src); err != nil {
		return "", fmt.Errorf("mutants: copying the module: %w", err)
	}
	if m.Name != "" {
		if err := m.Apply(src); err != nil {
			return "", err
		}
	}
	bin := filepath.Join(dir, "fencedlock")
	// -trimpath keeps the copy's path out of the build, so the build cache
	// serves every package the mutant did not touch.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", bin, "./cmd/fencedlock")
	cmd.Dir = src
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("mutants: building %s: %w\n%s", name, err, out.String())
	}
	return bin, nil
}
