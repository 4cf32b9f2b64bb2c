package grpcserver

import (
	"context"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the codec wrapped here
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
)

// A request body that is not a valid protobuf message is the caller's
// mistake, so it must be answered INVALID_ARGUMENT. grpc-go answers a
// codec's error with INTERNAL ("grpc: failed to unmarshal the received
// message") and offers no hook to change that, so the server's codec
// does not fail: it remembers the message it could not fill, and the
// first interceptor, which every request passes (unary) or whose stream
// receives every message (streaming), refuses that message.

// badBodies maps a request message the codec could not fill to the
// parse error. An entry lives from the codec's call to the interceptor's,
// which follows at once on the same call.
var badBodies sync.Map

// requestCodec is grpc's protobuf codec, but for a body that does not
// parse (see above).
type requestCodec struct{ encoding.CodecV2 }

func (c requestCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if err := c.CodecV2.Unmarshal(data, v); err != nil {
		badBodies.Store(v, err)
	}
	return nil
}

// badBody answers a message the codec could not fill, if m is one.
func badBody(m any) error {
	if err, ok := badBodies.LoadAndDelete(m); ok {
		return status.Errorf(codes.InvalidArgument, "the request body is not a valid protobuf message: %v", err)
	}
	return nil
}

// badBodyCodec is the server option that installs requestCodec.
func badBodyCodec() grpc.ServerOption {
	return grpc.ForceServerCodecV2(requestCodec{encoding.GetCodecV2("proto")})
}

func badBodyUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := badBody(req); err != nil {
		return nil, err
	}
	return handler(ctx, req)
}

func badBodyStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	return handler(srv, badBodyServerStream{ss})
}

type badBodyServerStream struct{ grpc.ServerStream }

func (s badBodyServerStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return badBody(m)
}
