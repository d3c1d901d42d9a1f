package redlock_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// recorder is a slog.Handler that keeps every record, at every level.
type recorder struct {
	mu      sync.Mutex // protects records
	records []slog.Record
}

func (*recorder) Enabled(context.Context, slog.Level) bool { return true }
func (h *recorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.records = append(h.records, r.Clone())
	return nil
}
func (h *recorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recorder) WithGroup(string) slog.Handler      { return h }

// has reports whether a record at level mentions substr in its message or
// attributes.
func (h *recorder) has(level slog.Level, substr string) bool {
	return len(h.find(level, substr)) > 0
}

// find returns the records at level that mention substr.
func (h *recorder) find(level slog.Level, substr string) []slog.Record {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []slog.Record
	for _, r := range h.records {
		if r.Level != level {
			continue
		}
		text := r.Message
		r.Attrs(func(a slog.Attr) bool { text += " " + a.String(); return true })
		if strings.Contains(text, substr) {
			out = append(out, r)
		}
	}
	return out
}
