package mutants

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// TestMutantsApplyOnce: every mutant's old text occurs exactly once in the
// current source, so that a refactor cannot silently disarm one.
func TestMutantsApplyOnce(t *testing.T) {
	root, err := ModuleRoot(".")
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, m := range List() {
		t.Run(m.Name, func(t *testing.T) {
			switch {
			case m.Name == "" || names[m.Name]:
				t.Fatalf("name %q empty or taken twice", m.Name)
			case m.Description == "":
				t.Error("no description")
			case m.Old == m.New:
				t.Error("old and new text are the same")
			}
			names[m.Name] = true
			src, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(m.File)))
			if err != nil {
				t.Fatal(err)
			}
			out, err := m.applyTo(src)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Equal(out, src) || !bytes.Contains(out, []byte(m.New)) {
				t.Errorf("applying it left %s unchanged or without the new text", m.File)
			}
		})
	}
	if len(names) < 12 {
		t.Errorf("%d mutants, want at least 12", len(names))
	}
}

func TestApplyRefusesAmbiguousOrMissingText(t *testing.T) {
	cases := []struct {
		name, src, old string
	}{
		{"missing", "a b c", "x"},
		{"twice", "x b x", "x"},
		{"empty old text", "a b c", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := Mutant{Name: "m", File: "f", Old: tc.old, New: "y"}
			if _, err := m.applyTo([]byte(tc.src)); !errors.Is(err, ErrApply) {
				t.Fatalf("err %v, want ErrApply", err)
			}
		})
	}
}

func TestApplyWritesTheCopy(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.lua")
	if err := os.WriteFile(path, []byte("if a == b then\n  del()\nend\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m := Mutant{Name: "m", File: "x.lua", Old: "a == b", New: "true"}
	if err := m.Apply(dir); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "if true then\n  del()\nend\n"; string(got) != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if err := m.Apply(dir); !errors.Is(err, ErrApply) {
		t.Errorf("applying twice: err %v, want ErrApply", err)
	}
}
