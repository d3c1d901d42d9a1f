package doccheck

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const (
	beginMarker = "// doc block: "
	endMarker   = "// end doc block"
)

// block is one fenced code block of a page.
type block struct {
	page string // README.md or docs/NAME.md
	line int    // of the opening fence
	lang string
	text string
}

// region is a marked region of a Go file, or a whole file (page "").
type region struct {
	file string // relative to the module root
	line int
	page string
	text string
}

// root is the module's root directory.
const root = "../.."

// pages are the documents whose Go blocks must compile.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, filepath.ToSlash(strings.TrimPrefix(d, root+string(filepath.Separator))))
	}
	return out
}

// fencedBlocks returns the fenced code blocks of page.
func fencedBlocks(page, text string) ([]block, error) {
	var out []block
	var cur *block
	var body strings.Builder
	for n, line := range strings.Split(text, "\n") {
		fence, isFence := strings.CutPrefix(line, "```")
		if cur == nil && !isFence && strings.HasPrefix(strings.TrimLeft(line, " \t>"), "```go") {
			return nil, fmt.Errorf("%s:%d: an indented Go block, which this check would not see: start it at the margin", page, n+1)
		}
		switch {
		case cur == nil && isFence:
			cur = &block{page: page, line: n + 1, lang: strings.TrimSpace(fence)}
			body.Reset()
		case cur != nil && isFence && strings.TrimSpace(fence) == "":
			// gofmt puts a blank line between a func and the end marker.
			cur.text = strings.TrimRight(body.String(), "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			body.WriteString(line + "\n")
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block never closed", page, cur.line)
	}
	return out, nil
}

// compiledFiles lists the Go files that `go vet ./...` and `go test ./...`
// compile on this platform, test files included, relative to the root.
func compiledFiles(t *testing.T) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=Dir,GoFiles,TestGoFiles,XTestGoFiles", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, &stderr)
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var files []string
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			Dir                                string
			GoFiles, TestGoFiles, XTestGoFiles []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		rel, err := filepath.Rel(abs, p.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, group := range [][]string{p.GoFiles, p.TestGoFiles, p.XTestGoFiles} {
			for _, f := range group {
				files = append(files, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	return files
}

// regions returns file's marked regions and the whole file.
func regions(file, text string) ([]region, error) {
	out := []region{{file: file, line: 1, text: text}}
	var cur *region
	var indent string
	var body strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case strings.HasPrefix(trimmed, beginMarker):
			if cur != nil {
				return nil, fmt.Errorf("%s:%d: a doc block begins inside the one of line %d", file, n, cur.line)
			}
			cur = &region{file: file, line: n, page: strings.TrimSpace(strings.TrimPrefix(trimmed, beginMarker))}
			indent = line[:len(line)-len(trimmed)]
			body.Reset()
		case trimmed == endMarker:
			if cur == nil {
				return nil, fmt.Errorf("%s:%d: %q without a doc block", file, n, endMarker)
			}
			// gofmt puts a blank line between a func and the end marker.
			cur.text = strings.TrimRight(body.String(), "\n") + "\n"
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			if line != "" && !strings.HasPrefix(line, indent) {
				return nil, fmt.Errorf("%s:%d: line indented less than its doc block's marker", file, n)
			}
			body.WriteString(strings.TrimPrefix(line, indent) + "\n")
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: doc block never ended", file, cur.line)
	}
	return out, sc.Err()
}

// TestGoBlocksCompile checks that every ```go block of README.md and
// docs/*.md is a compiled Go file of the module, or a region of one marked
// for that page, and that every marked region is shown on its page.
func TestGoBlocksCompile(t *testing.T) {
	var all []region
	for _, f := range compiledFiles(t) {
		src, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		rs, err := regions(f, string(src))
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, rs...)
	}

	shown := make(map[region]bool)
	blocks := 0
	for _, page := range pages(t) {
		text, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		bs, err := fencedBlocks(page, string(text))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range bs {
			if b.lang != "go" {
				continue
			}
			blocks++
			found := false
			for _, r := range all {
				if r.text == b.text && (r.page == "" || r.page == b.page) {
					shown[r] = true
					found = true
				}
			}
			if !found {
				var candidates []string
				for _, r := range all {
					if r.page == b.page {
						candidates = append(candidates, fmt.Sprintf("%s:%d", r.file, r.line))
					}
				}
				t.Errorf("%s:%d: this Go block is neither a compiled Go file nor a region marked %q (regions marked for this page: %v):\n%s",
					b.page, b.line, beginMarker+b.page, candidates, b.text)
			}
		}
	}
	if blocks == 0 {
		t.Error("no Go block found in README.md or docs/*.md: is the parser broken?")
	}
	for _, r := range all {
		if r.page != "" && !shown[r] {
			t.Errorf("%s:%d: region marked for %s is not shown there as a ```go block (changed on one side only?):\n%s",
				r.file, r.line, r.page, r.text)
		}
	}
}

// TestParsers checks the two parsers on small inputs, so that a broken one
// cannot pass every page vacuously.
func TestParsers(t *testing.T) {
	bs, err := fencedBlocks("p.md", "a\n```go\nx := 1\n\ny()\n```\n```\nout\n```\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs[0].lang != "go" || bs[0].text != "x := 1\n\ny()\n" || bs[0].line != 2 || bs[1].lang != "" {
		t.Errorf("fencedBlocks = %+v", bs)
	}
	for _, bad := range []string{"```go\nx\n", "- a list\n  ```go\n  x\n  ```\n"} {
		if _, err := fencedBlocks("p.md", bad); err == nil {
			t.Errorf("fencedBlocks accepted %q", bad)
		}
	}

	rs, err := regions("f.go", "func f() {\n\t// doc block: README.md\n\tx := 1\n\n\tif x > 0 {\n\t\ty()\n\t}\n\t// end doc block\n}\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 2 || rs[1].page != "README.md" || rs[1].text != "x := 1\n\nif x > 0 {\n\ty()\n}\n" {
		t.Errorf("regions = %+v", rs)
	}
	for _, bad := range []string{
		"\t// doc block: README.md\nx\n\t// end doc block\n",
		"// doc block: README.md\nx\n",
		"// end doc block\n",
	} {
		if _, err := regions("f.go", bad); err == nil {
			t.Errorf("regions accepted %q", bad)
		}
	}
}
