// Package grpcflow sets the HTTP/2 flow-control windows of penguin's gRPC
// connections, on both ends: every server grpcserver builds and every
// connection grpcclient opens.
//
// grpc-go sizes its windows dynamically by default: the receiving end of a
// connection measures the bandwidth-delay product by sending a PING each
// time data arrives after the previous PING's answer, and widens the
// windows when the data of one round trip fills them. penguin's calls are
// small messages in both directions (a session's events, a unary call), so
// the windows never widen, and every burst of data costs its sender a
// PING to answer (a read and a write) and its receiver one to send and one
// to read. In the end-to-end task benchmark the client's PINGs were some
// 6.5 answers a task written by the server, with the reads of their
// PINGs, and the server's own one a task (docs/performance.md).
//
// Static windows send no such PING. They are set wide enough that a
// large message (the engine sending the llm service a long history, up to
// the services' message bound) is not held back on a network with a round
// trip of a millisecond or so: a stream may have StreamWindow bytes in
// flight, a connection ConnWindow over all its streams, which is also what
// a receiver may have to hold for a reader that does not keep up (the
// dynamic windows grow to 16 MiB). Only a large upload over a path whose
// bandwidth-delay product exceeds StreamWindow (100 Mbit/s at 80 ms, say)
// is slower than with dynamic windows.
package grpcflow

import "google.golang.org/grpc"

const (
	// StreamWindow is the flow-control window of each stream.
	StreamWindow = 1 << 20
	// ConnWindow is the flow-control window of a connection, shared by
	// its streams.
	ConnWindow = 4 << 20
)

// ServerOptions returns the server options that set the static windows.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(StreamWindow), grpc.StaticConnWindowSize(ConnWindow)}
}

// DialOptions returns the dial options that set the static windows.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow)}
}
