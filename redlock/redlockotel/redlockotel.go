// Package redlockotel traces package redlock's locks with OpenTelemetry: a
// span per acquisition call (TryLock, Lock, Do), per Extend (the
// watchdog's included) and per Unlock, with an event per node reply or
// node error. It uses only the OpenTelemetry API; the program chooses the
// SDK and exporter. It lives in a package of its own so that a program that
// uses redlock without it links no OpenTelemetry code.
//
// Attributes of every span: fencedlock.token (the hold's fencing token; on
// an acquisition once it succeeded) and either fencedlock.key (the key,
// with [WithKeys]) or fencedlock.key_hash (by default: the first 8 bytes of
// the key's SHA-256 in hex, so that spans of one key can be matched up
// without the key itself being recorded; a key that can be guessed can be
// found from its hash). Acquisitions also get fencedlock.outcome (acquired,
// refused, node_error, canceled, deadline_exceeded). A failed operation
// records its error and sets the span's status to Error.
//
// Events: "fencedlock.node_reply" (fencedlock.node, fencedlock.round_trip_seconds)
// for each node that answered a call of the operation, "fencedlock.node_error"
// (fencedlock.node, fencedlock.round_trip_seconds, error.message) for each call that
// failed. Calls that finish after the operation returned (it decides at a
// quorum) come after the span ended and are not recorded.
package redlockotel

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"math"
	"strconv"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/fencedlock/fencedlock/redlock"
	"github.com/fencedlock/fencedlock/redlock/internal/outcome"
)

// ScopeName is the instrumentation scope of the spans.
const ScopeName = "github.com/fencedlock/fencedlock/redlock/redlockotel"

// Attribute keys.
const (
	KeyAttr       = attribute.Key("fencedlock.key")
	KeyHashAttr   = attribute.Key("fencedlock.key_hash")
	TokenAttr     = attribute.Key("fencedlock.token")
	OutcomeAttr   = attribute.Key("fencedlock.outcome")
	NodeAttr      = attribute.Key("fencedlock.node")
	RoundTripAttr = attribute.Key("fencedlock.round_trip_seconds")
)

// Tracer is a redlock.Observer (give it to redlock.WithObserver) that
// implements redlock.Tracer. It is safe for concurrent use.
type Tracer struct {
	redlock.NopObserver
	tracer trace.Tracer
	keys   bool
}

var (
	_ redlock.Observer = (*Tracer)(nil)
	_ redlock.Tracer   = (*Tracer)(nil)
)

// Option configures New.
type Option func(*Tracer)

// WithKeys records each key as it is (fencedlock.key) instead of its hash.
// Off by default: keys may name users or orders, and their number is
// unbounded.
func WithKeys() Option { return func(t *Tracer) { t.keys = true } }

// New returns a Tracer whose spans come from tp (e.g. otel.GetTracerProvider()).
// A nil tp is the global provider's.
func New(tp trace.TracerProvider, opts ...Option) *Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	t := &Tracer{tracer: tp.Tracer(ScopeName)}
	for _, o := range opts {
		if o != nil {
			o(t)
		}
	}
	return t
}

// StartOp starts the operation's span, a child of ctx's.
func (t *Tracer) StartOp(ctx context.Context, op redlock.Op, key string, token uint64) redlock.OpTrace {
	attrs := make([]attribute.KeyValue, 0, 2)
	if t.keys {
		attrs = append(attrs, KeyAttr.String(key))
	} else {
		attrs = append(attrs, KeyHashAttr.String(keyHash(key)))
	}
	if token > 0 {
		attrs = append(attrs, tokenAttr(token))
	}
	_, span := t.tracer.Start(ctx, "fencedlock."+op.String(),
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	return opSpan{span: span, op: op}
}

type opSpan struct {
	span trace.Span
	op   redlock.Op
}

func (s opSpan) Node(node int, d time.Duration, err error) {
	attrs := []attribute.KeyValue{NodeAttr.Int(node), RoundTripAttr.Float64(d.Seconds())}
	if err != nil {
		s.span.AddEvent("fencedlock.node_error", trace.WithAttributes(append(attrs, attribute.String("error.message", err.Error()))...))
		return
	}
	s.span.AddEvent("fencedlock.node_reply", trace.WithAttributes(attrs...))
}

func (s opSpan) End(token uint64, err error) {
	if s.op == redlock.OpAcquire {
		s.span.SetAttributes(OutcomeAttr.String(outcome.Of(err)))
		if token > 0 {
			s.span.SetAttributes(tokenAttr(token))
		}
	}
	if err != nil {
		s.span.RecordError(err)
		s.span.SetStatus(codes.Error, err.Error())
	}
	s.span.End()
}

// tokenAttr is the token as an int64 attribute, or as a decimal string
// past the largest int64.
func tokenAttr(token uint64) attribute.KeyValue {
	if token > math.MaxInt64 {
		return TokenAttr.String(strconv.FormatUint(token, 10))
	}
	return TokenAttr.Int64(int64(token))
}

// keyHash is the first 8 bytes of the key's SHA-256, in hex.
func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}
