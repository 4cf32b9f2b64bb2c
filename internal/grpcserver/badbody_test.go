package grpcserver_test

import (
	"math/rand/v2"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// rawCodec sends bytes as they are, as a client with a broken encoder
// would.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*[]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*[]byte) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "proto" }

// A request body that is not a protobuf message is the caller's mistake:
// unary and streaming calls alike answer INVALID_ARGUMENT, never INTERNAL.
func TestUnparseableBodyIsInvalidArgument(t *testing.T) {
	r := start(t, grpcserver.Options{}, nil)
	ctx := testkit.Context(t, time.Minute)
	rng := rand.New(rand.NewPCG(24, 24))
	bad := 0
	for i := 0; bad < 300 && i < 3000; i++ {
		body := make([]byte, 1+rng.IntN(40))
		for j := range body {
			body[j] = byte(rng.UintN(256))
		}
		if proto.Unmarshal(body, &healthpb.HealthCheckRequest{}) == nil {
			continue // it parses: not a bad body
		}
		bad++
		var out []byte
		err := r.conn.Invoke(ctx, "/grpc.health.v1.Health/Check", &body, &out, grpc.ForceCodecV2(rawCodec{}))
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("unary body %x: %v, want InvalidArgument", body, err)
		}
		if i%10 == 0 {
			desc := &grpc.StreamDesc{StreamName: "Watch", ServerStreams: true}
			s, err := r.conn.NewStream(ctx, desc, "/grpc.health.v1.Health/Watch", grpc.ForceCodecV2(rawCodec{}))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SendMsg(&body); err != nil {
				t.Fatal(err)
			}
			_ = s.CloseSend()
			if err := s.RecvMsg(&out); status.Code(err) != codes.InvalidArgument {
				t.Fatalf("streaming body %x: %v, want InvalidArgument", body, err)
			}
		}
	}
	if bad < 300 {
		t.Fatalf("only %d bad bodies made", bad)
	}
	// A valid body is still served.
	if _, err := healthpb.NewHealthClient(r.conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("a valid request: %v", err)
	}
}
