package doccheck

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode"
)

// link matches a Markdown link's target: [text](target).
var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// slug is the anchor GitHub gives a heading: lower case, letters, digits,
// spaces, hyphens and underscores kept, spaces turned into hyphens.
func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// anchors returns the anchors of a Markdown page's headings (outside code
// blocks).
func anchors(text string) map[string]bool {
	out := make(map[string]bool)
	inCode := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, "```") {
			inCode = !inCode
			continue
		}
		if inCode || !strings.HasPrefix(line, "#") {
			continue
		}
		out[slug(strings.TrimSpace(strings.TrimLeft(line, "#")))] = true
	}
	return out
}

// TestLinks checks that every relative link of README.md and docs/*.md
// names a file of the repository and, with a #fragment into a Markdown
// page, one of its headings: pages move, and their links must follow.
func TestLinks(t *testing.T) {
	for _, page := range pages(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = path.Join(path.Dir(page), file)
			}
			body, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dest)))
			if err != nil {
				if _, serr := os.Stat(filepath.Join(root, filepath.FromSlash(dest))); serr != nil {
					t.Errorf("%s: link %q: %v", page, target, serr)
				}
				continue // a directory
			}
			if frag != "" && strings.HasSuffix(dest, ".md") && !anchors(string(body))[frag] {
				t.Errorf("%s: link %q: %s has no heading with anchor #%s", page, target, dest, frag)
			}
		}
	}
}

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Claim 6 — fairness", "claim-6--fairness"},
		{"Claims 1–2 under amnesia", "claims-12-under-amnesia"},
		{"Why `raise-without-ownership` cannot be observed", "why-raise-without-ownership-cannot-be-observed"},
		{"The first program", "the-first-program"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}
