package fencinggrpc

import (
	"context"
	"strconv"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
)

// MetadataKey is the gRPC metadata key that carries a fencing token, in
// decimal (the HTTP header [fencing.Header], lower-cased as gRPC requires).
const MetadataKey = "fencing-token"

type outgoingKey struct{}

// WithToken returns a copy of ctx whose gRPC calls, made through a
// connection with [UnaryClientInterceptor] or [StreamClientInterceptor],
// carry token (e.g. a redlock hold's Token) in their metadata.
func WithToken(ctx context.Context, token uint64) context.Context {
	return context.WithValue(ctx, outgoingKey{}, token)
}

// withOutgoingToken puts the token WithToken set, if any, into ctx's
// outgoing metadata, in place of any value the caller set for the key.
func withOutgoingToken(ctx context.Context) context.Context {
	token, ok := ctx.Value(outgoingKey{}).(uint64)
	if !ok {
		return ctx
	}
	md, _ := metadata.FromOutgoingContext(ctx) // a copy
	if md == nil {
		md = metadata.MD{}
	}
	md.Set(MetadataKey, strconv.FormatUint(token, 10))
	return metadata.NewOutgoingContext(ctx, md)
}

// UnaryClientInterceptor sends the token of [WithToken] with each unary
// call; a call whose ctx has none goes out unchanged.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return invoker(withOutgoingToken(ctx), method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor sends the token of [WithToken] when a stream
// opens; a stream whose ctx has none opens unchanged.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		return streamer(withOutgoingToken(ctx), desc, cc, method, opts...)
	}
}
