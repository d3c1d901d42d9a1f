package fencing

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Header is the HTTP header that carries a fencing token, in decimal.
const Header = "Fencing-Token"

// SetToken sets the Fencing-Token header of req to token.
func SetToken(req *http.Request, token uint64) {
	req.Header.Set(Header, strconv.FormatUint(token, 10))
}

// ParseToken parses a token in decimal, as the Fencing-Token header carries
// it. Malformed and zero tokens get an error matching ErrInvalidArgument.
func ParseToken(s string) (uint64, error) {
	t, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, invalidf("malformed fencing token %q: want a decimal integer in 1..%d", s, uint64(1<<64-1))
	}
	if t == 0 {
		return 0, invalidf("token must be > 0")
	}
	return t, nil
}

type ctxTokenKey struct{}

// TokenFromContext returns the token that Middleware admitted for the request
// whose context is ctx.
func TokenFromContext(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(ctxTokenKey{}).(uint64)
	return t, ok
}

// ErrorHandler writes the response for a request that Middleware refused.
type ErrorHandler func(w http.ResponseWriter, r *http.Request, err error)

// MiddlewareOption configures Middleware; every [Option] is one.
type MiddlewareOption interface{ applyMiddleware(*middleware) }

type middlewareOptionFunc func(*middleware)

func (f middlewareOptionFunc) applyMiddleware(m *middleware) { f(m) }

// WithErrorHandler replaces the default responses (see Middleware), e.g. to log
// storage errors or to answer in another format.
func WithErrorHandler(h ErrorHandler) MiddlewareOption {
	return middlewareOptionFunc(func(m *middleware) { m.onError = h })
}

type middleware struct {
	guard    Guard
	resource func(*http.Request) string
	onError  ErrorHandler
	obs      GuardObserver // nil: none
}

// Middleware admits each request's Fencing-Token for the resource that
// resource(r) names, through g, before next runs; next finds the token with
// TokenFromContext. Refused requests get a JSON body and:
//
//	409 Conflict             a stale token: {"error","resource","token","highest"}
//	400 Bad Request          missing, repeated, malformed or zero token, or empty resource
//	503 Service Unavailable  the guard failed (e.g. storage unreachable); the error is not shown
//
// The admission and the handler's write are two steps: a newer holder can be
// admitted in between. Where the storage allows, do the write through a guard
// that checks again in the same step (Redis.Set, SQL.AdmitTx), and use the
// middleware to turn stale requests away early.
//
// The admission is committed before next runs and nothing undoes it: if next
// fails afterwards (an error, a panic, a lost connection), the token stays
// raised although nothing was written, and older tokens are refused from then
// on. A retried request with the same token is admitted again (equal tokens
// are) and runs next again, so next must tolerate running twice.
func Middleware(g Guard, resource func(*http.Request) string, opts ...MiddlewareOption) func(http.Handler) http.Handler {
	m := &middleware{guard: g, resource: resource, onError: writeError}
	for _, o := range opts {
		if o != nil {
			o.applyMiddleware(m)
		}
	}
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			token, err := m.admit(r)
			if err != nil {
				m.onError(w, r, err)
				return
			}
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), ctxTokenKey{}, token)))
		})
	}
}

func (m *middleware) admit(r *http.Request) (uint64, error) {
	vals := r.Header.Values(Header)
	switch len(vals) {
	case 0:
		return 0, invalidf("missing %s header", Header)
	case 1:
	default:
		return 0, invalidf("%d %s headers, want one", len(vals), Header)
	}
	token, err := ParseToken(vals[0])
	if err != nil {
		return 0, err
	}
	res := m.resource(r)
	if res == "" {
		return 0, invalidf("empty resource")
	}
	return token, observe(m.obs, res, token, m.guard.Admit(r.Context(), res, token))
}

// errorBody is the JSON body of a refused request.
type errorBody struct {
	Error    string `json:"error"`
	Reason   string `json:"reason,omitempty"`
	Resource string `json:"resource,omitempty"`
	Token    uint64 `json:"token,omitempty"`
	Highest  uint64 `json:"highest,omitempty"`
}

// writeError is the default ErrorHandler.
func writeError(w http.ResponseWriter, _ *http.Request, err error) {
	var stale *StaleTokenError
	var code int
	var body errorBody
	switch {
	case errors.As(err, &stale):
		code = http.StatusConflict
		body = errorBody{Error: "stale fencing token", Resource: stale.Resource, Token: stale.Token, Highest: stale.Highest}
	case errors.Is(err, ErrInvalidArgument):
		code = http.StatusBadRequest
		body = errorBody{Error: "bad fencing request", Reason: strings.TrimPrefix(err.Error(), ErrInvalidArgument.Error()+": ")}
	default:
		code = http.StatusServiceUnavailable
		body = errorBody{Error: "fencing guard unavailable"}
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(body)
}
