// Package fencinggrpc carries fencing tokens over gRPC, as package fencing's
// Middleware does over HTTP: client interceptors put the token of the
// caller's hold into the outgoing metadata ([MetadataKey]), and server
// interceptors admit it through a [fencing.Guard] before the handler runs.
// It lives in a package of its own so that only its users link gRPC.
//
// A stale token is answered with [codes.Aborted]: gRPC's code for "a
// concurrency issue such as a sequencer check failure", which a fencing
// token is, and the code gRPC maps to and from HTTP 409 Conflict, what the
// HTTP middleware answers. The caller should not retry the call as it is:
// its hold was superseded, and only a new hold (a new token) may go on. A
// missing, repeated, malformed or zero token gets [codes.InvalidArgument]
// (HTTP 400), and a guard that failed [codes.Unavailable] (HTTP 503).
//
// Deadlines need nothing from this package: gRPC sends a ctx's deadline
// to the server, whose handler's ctx ends by it. A call made with the ctx
// of redlock's Lock.Lease therefore stops on the server too by the end of
// the hold's validity, less the lease's margin.
//
// The admission is committed before the handler runs, as with the HTTP
// middleware (see package fencing): a handler that fails afterwards leaves
// the token raised, and a retried call with the same token runs the
// handler again.
package fencinggrpc
