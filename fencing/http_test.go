package fencing_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/fencedlock/fencedlock/fencing"
)

// guardFunc is a Guard made of a function: here, a storage that fails.
type guardFunc func(ctx context.Context, resource string, token uint64) error

func (f guardFunc) Admit(ctx context.Context, resource string, token uint64) error {
	return f(ctx, resource, token)
}

func TestMiddleware(t *testing.T) {
	mem := fencing.NewMemory()
	mustAdmit(t, mem, "held", 10)
	failing := guardFunc(func(context.Context, string, uint64) error { return errors.New("connection refused") })
	byPath := func(r *http.Request) string { return r.URL.Path[1:] }

	tests := []struct {
		name      string
		guard     fencing.Guard
		path      string
		tokens    []string // Fencing-Token header values
		wantCode  int
		wantBody  map[string]any // expected JSON fields (numbers as float64)
		wantToken uint64         // seen by the handler
	}{
		{"admitted", mem, "/held", []string{"11"}, http.StatusOK, nil, 11},
		{"equal token admitted", mem, "/held", []string{"11"}, http.StatusOK, nil, 11},
		{"new resource", mem, "/fresh", []string{"1"}, http.StatusOK, nil, 1},
		{"stale", mem, "/held", []string{"3"}, http.StatusConflict,
			map[string]any{"error": "stale fencing token", "resource": "held", "token": 3.0, "highest": 11.0}, 0},
		{"missing header", mem, "/held", nil, http.StatusBadRequest,
			map[string]any{"error": "bad fencing request", "reason": "missing Fencing-Token header"}, 0},
		{"two headers", mem, "/held", []string{"12", "13"}, http.StatusBadRequest,
			map[string]any{"error": "bad fencing request", "reason": "2 Fencing-Token headers, want one"}, 0},
		{"malformed", mem, "/held", []string{"12abc"}, http.StatusBadRequest, map[string]any{"error": "bad fencing request"}, 0},
		{"negative", mem, "/held", []string{"-12"}, http.StatusBadRequest, map[string]any{"error": "bad fencing request"}, 0},
		{"overflow", mem, "/held", []string{"18446744073709551616"}, http.StatusBadRequest, map[string]any{"error": "bad fencing request"}, 0},
		{"empty", mem, "/held", []string{""}, http.StatusBadRequest, map[string]any{"error": "bad fencing request"}, 0},
		{"zero", mem, "/held", []string{"0"}, http.StatusBadRequest,
			map[string]any{"error": "bad fencing request", "reason": "token must be > 0"}, 0},
		{"empty resource", mem, "/", []string{"12"}, http.StatusBadRequest,
			map[string]any{"error": "bad fencing request", "reason": "empty resource"}, 0},
		{"guard fails", failing, "/held", []string{"12"}, http.StatusServiceUnavailable,
			map[string]any{"error": "fencing guard unavailable"}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var seen uint64
			h := fencing.Middleware(tt.guard, byPath)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				seen, _ = fencing.TokenFromContext(r.Context())
			}))
			req := httptest.NewRequestWithContext(t.Context(), http.MethodPut, tt.path, nil)
			for _, v := range tt.tokens {
				req.Header.Add(fencing.Header, v)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)

			if rec.Code != tt.wantCode || seen != tt.wantToken {
				t.Fatalf("code %d, handler saw token %d; want %d, %d (body %s)", rec.Code, seen, tt.wantCode, tt.wantToken, rec.Body)
			}
			if tt.wantBody == nil {
				return
			}
			if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			var body map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body %q: %v", rec.Body, err)
			}
			for k, want := range tt.wantBody {
				if body[k] != want {
					t.Errorf("body[%q] = %v, want %v (body %s)", k, body[k], want, rec.Body)
				}
			}
		})
	}
}

func TestMiddlewareErrorHandler(t *testing.T) {
	mem := fencing.NewMemory()
	mustAdmit(t, mem, "r", 5)
	var got error
	mw := fencing.Middleware(mem, func(*http.Request) string { return "r" },
		fencing.WithErrorHandler(func(w http.ResponseWriter, _ *http.Request, err error) {
			got = err
			w.WriteHeader(http.StatusTeapot)
		}))
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("handler ran for a stale token") }))
	req := httptest.NewRequestWithContext(t.Context(), http.MethodPost, "/", nil)
	fencing.SetToken(req, 4)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var se *fencing.StaleTokenError
	if rec.Code != http.StatusTeapot || !errors.As(got, &se) || se.Highest != 5 {
		t.Errorf("code %d, error %v; want 418 and a stale token with highest 5", rec.Code, got)
	}
}

func TestTokenFromContextWithoutMiddleware(t *testing.T) {
	if tok, ok := fencing.TokenFromContext(t.Context()); ok || tok != 0 {
		t.Errorf("TokenFromContext = %d, %v; want 0, false", tok, ok)
	}
}

func TestParseToken(t *testing.T) {
	tests := []struct {
		in      string
		want    uint64
		invalid bool
	}{
		{"1", 1, false},
		{"42", 42, false},
		{"18446744073709551615", 1<<64 - 1, false},
		{"0", 0, true},
		{"", 0, true},
		{" 1", 0, true},
		{"+1", 0, true},
		{"-1", 0, true},
		{"0x10", 0, true},
		{"1e3", 0, true},
		{"18446744073709551616", 0, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Quote(tt.in), func(t *testing.T) {
			got, err := fencing.ParseToken(tt.in)
			if tt.invalid != errors.Is(err, fencing.ErrInvalidArgument) || got != tt.want || (!tt.invalid && err != nil) {
				t.Errorf("ParseToken(%q) = %d, %v", tt.in, got, err)
			}
		})
	}
}

func TestSetToken(t *testing.T) {
	req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
	fencing.SetToken(req, 1<<64-1)
	fencing.SetToken(req, 77) // replaces, never adds a second header
	if v := req.Header.Values(fencing.Header); len(v) != 1 || v[0] != "77" {
		t.Errorf("header = %q, want [77]", v)
	}
}
