package fencing

import (
	"context"
	"errors"
	"fmt"
)

// Guard admits (resource, token) only if token is greater than or equal to the
// highest token admitted for resource so far, and records token as the new
// highest, atomically. A stale token gets an error that matches ErrStaleToken
// (a *StaleTokenError); an empty resource or a zero token gets one that matches
// ErrInvalidArgument.
type Guard interface {
	Admit(ctx context.Context, resource string, token uint64) error
}

// Appender is a Guard that also keeps a fenced append-only log per resource:
// Append admits the token and appends the entry in one atomic step, or does
// neither. Memory and Redis are Appenders.
type Appender interface {
	Guard
	Append(ctx context.Context, resource string, token uint64, entry string) error
}

var (
	// ErrStaleToken means that a higher token was already admitted for the
	// resource. errors.As with a *StaleTokenError gives that token.
	ErrStaleToken = errors.New("fencing: stale token")
	// ErrInvalidArgument means bad input (empty resource, zero or malformed
	// token, a token the storage cannot hold); it is wrapped with the reason.
	ErrInvalidArgument = errors.New("fencing: invalid argument")
)

// StaleTokenError is the error a Guard returns for a stale token.
type StaleTokenError struct {
	Resource string
	Token    uint64 // the token that was refused
	Highest  uint64 // the highest token admitted for Resource when it was refused
}

func (e *StaleTokenError) Error() string {
	return fmt.Sprintf("fencing: stale token %d for resource %q: %d already admitted", e.Token, e.Resource, e.Highest)
}

// Unwrap returns ErrStaleToken, so that errors.Is(err, ErrStaleToken) holds.
func (e *StaleTokenError) Unwrap() error { return ErrStaleToken }

// Entry is one record of a fenced append-only log.
type Entry struct {
	Token uint64 // the token under which Data was appended
	Data  string
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidArgument}, args...)...)
}

// validate checks what every Guard requires, before any I/O.
func validate(resource string, token uint64) error {
	switch {
	case resource == "":
		return invalidf("empty resource")
	case token == 0:
		return invalidf("token must be > 0")
	}
	return nil
}
