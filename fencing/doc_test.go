package fencing_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fencedlock/fencedlock/fencing"
)

// TestMiddlewareHandlerFailsAfterAdmission pins what the Middleware doc
// promises: admission is committed before the handler runs, so a handler that
// fails leaves the token raised, and a retried request runs it again.
func TestMiddlewareHandlerFailsAfterAdmission(t *testing.T) {
	mem := fencing.NewMemory()
	mustAdmit(t, mem, "r", 5)
	runs := 0
	h := fencing.Middleware(mem, func(*http.Request) string { return "r" })(
		http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			runs++
			http.Error(w, "disk full", http.StatusInternalServerError) // wrote nothing
		}))
	send := func(token uint64) int {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodPut, "/", nil)
		fencing.SetToken(req, token)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := send(9); code != http.StatusInternalServerError {
		t.Fatalf("first request: %d", code)
	}
	if h := mem.Highest("r"); h != 9 {
		t.Errorf("after a failed handler the mark is %d, want 9: it stays raised", h)
	}
	if code := send(8); code != http.StatusConflict {
		t.Errorf("an older token after the failed request: %d, want 409", code)
	}
	if code := send(9); code != http.StatusInternalServerError || runs != 2 {
		t.Errorf("retried request: %d, handler ran %d times; want it admitted and run again", code, runs)
	}
}

// TestDocStatesFailureSemantics: the package doc says, per guard, what happens
// on a failure after admission and on a retried call, and the Middleware doc
// says that a failed handler leaves the token raised.
func TestDocStatesFailureSemantics(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/fencedlock/fencedlock/fencing")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(p.Doc, "Failures after admission, and retried calls")
	if !ok {
		t.Fatalf("package doc has no section on failures after admission and retried calls:\n%s", p.Doc)
	}
	for _, guard := range []string{"[Memory]", "[Redis]", "[SQL]", "[Middleware]"} {
		if !strings.Contains(section, guard) {
			t.Errorf("the section does not cover %s", guard)
		}
	}
	for _, f := range p.Funcs {
		if f.Name == "Middleware" && !strings.Contains(strings.Join(strings.Fields(f.Doc), " "), "stays raised") {
			t.Errorf("Middleware doc does not say that the token stays raised when the handler fails:\n%s", f.Doc)
		}
	}
}
