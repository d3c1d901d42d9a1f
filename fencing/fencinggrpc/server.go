package fencinggrpc

import (
	"context"
	"errors"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/fencedlock/fencedlock/fencing"
)

// Resource names the resource whose token a call must carry: fullMethod
// is the call's method ("/package.Service/Method"), req its request, or nil
// for a stream (admitted when it opens, before any message). fenced false
// lets the call through unchecked, with or without a token.
type Resource func(ctx context.Context, fullMethod string, req any) (resource string, fenced bool)

type admittedKey struct{}

// TokenFromContext returns the token that a server interceptor admitted for
// the call whose handler's context is ctx.
func TokenFromContext(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(admittedKey{}).(uint64)
	return t, ok
}

// UnaryServerInterceptor admits the token of each fenced call (see
// [Resource]) through g before the handler runs; the handler finds it with
// [TokenFromContext]. Refused calls get the codes of the package doc.
func UnaryServerInterceptor(g fencing.Guard, resource Resource) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		ctx, err := admit(ctx, g, resource, info.FullMethod, req)
		if err != nil {
			return nil, err
		}
		return handler(ctx, req)
	}
}

// StreamServerInterceptor admits the token of each fenced stream (see
// [Resource], called with a nil request) once, when it opens, before the
// handler runs; the handler finds it with [TokenFromContext] in the
// stream's Context. A stream that lives on while another writer admits a
// newer token is not stopped: a handler that writes through a long stream
// admits the token again with its guard at each write (a [fencing.Guard]'s
// Admit, in the write's transaction where the guard has one). Resource runs
// on the server's goroutine, unrecovered, like a handler.
func StreamServerInterceptor(g fencing.Guard, resource Resource) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		ctx, err := admit(ss.Context(), g, resource, info.FullMethod, nil)
		if err != nil {
			return err
		}
		return handler(srv, admittedStream{ss, ctx})
	}
}

// admittedStream is a ServerStream whose Context carries the admitted token.
type admittedStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s admittedStream) Context() context.Context { return s.ctx }

// admit checks a call's token and returns ctx with the admitted token, or
// the call's status error.
func admit(ctx context.Context, g fencing.Guard, resource Resource, method string, req any) (context.Context, error) {
	res, fenced := resource(ctx, method, req)
	if !fenced {
		return ctx, nil
	}
	md, _ := metadata.FromIncomingContext(ctx)
	vals := md.Get(MetadataKey)
	switch len(vals) {
	case 0:
		return nil, status.Errorf(codes.InvalidArgument, "missing %s metadata", MetadataKey)
	case 1:
	default:
		return nil, status.Errorf(codes.InvalidArgument, "%d %s metadata values, want one", len(vals), MetadataKey)
	}
	token, err := fencing.ParseToken(vals[0])
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if res == "" {
		return nil, status.Error(codes.InvalidArgument, "empty fencing resource")
	}
	if err := g.Admit(ctx, res, token); err != nil {
		return nil, statusOf(err)
	}
	return context.WithValue(ctx, admittedKey{}, token), nil
}

// statusOf is the status of a guard's refusal. A storage failure's
// message is not shown to the caller, as with the HTTP middleware.
func statusOf(err error) error {
	var stale *fencing.StaleTokenError
	switch {
	case errors.As(err, &stale):
		return status.Error(codes.Aborted, stale.Error())
	case errors.Is(err, fencing.ErrStaleToken):
		return status.Error(codes.Aborted, err.Error())
	case errors.Is(err, fencing.ErrInvalidArgument):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	default:
		return status.Error(codes.Unavailable, "fencing guard unavailable")
	}
}
