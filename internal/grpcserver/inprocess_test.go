package grpcserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// TestInProcessNeverEncodes sends a message that protobuf refuses to
// encode (a string field that is not UTF-8): over the network the client
// fails to marshal it and the server never sees it; through the in-process
// channel it reaches the handler, which answers, so nothing encoded it.
func TestInProcessNeverEncodes(t *testing.T) {
	t.Parallel()
	r := start(t, grpcserver.Options{}, nil)
	ctx := testkit.Context(t, 30*time.Second)
	waitStatus(ctx, t, r.conn, "", healthpb.HealthCheckResponse_SERVING)
	bad := &healthpb.HealthCheckRequest{Service: "no\xffservice"}
	for tr, want := range map[string]codes.Code{"tcp": codes.Internal, "in-process": codes.NotFound} {
		_, err := healthpb.NewHealthClient(r.via(tr)).Check(ctx, bad)
		if status.Code(err) != want {
			t.Errorf("%s: Check with a service name that is not UTF-8: %v, want %v", tr, err, want)
		}
	}
}

// TestInProcessIsCopied checks that neither side of an in-process call
// sees what the other changes in a message after handing it over, as
// over the network, where each side has its own: a streamed message the
// server reuses once sent (as the environment service recycles its output
// buffers), and a unary answer the server keeps (as a cache would).
func TestInProcessIsCopied(t *testing.T) {
	t.Parallel()
	forTracing(t, testInProcessIsCopied)
}

func testInProcessIsCopied(t *testing.T, opts grpcserver.Options) {
	origin := []string{"first"}
	sent := &penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{
		Message: &penguinv1.OmniMessage{Origin: origin}}}
	kept := &penguinv1.ListProvidersResponse{Providers: []*penguinv1.ProviderInfo{{Name: "kept"}}}
	f := &fakeLLM{
		streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
			if err := s.SendMsg(sent); err != nil {
				return err
			}
			origin[0] = "changed by the server after sending"
			return nil
		},
		listProviders: func(context.Context) (*penguinv1.ListProvidersResponse, error) { return kept, nil },
	}
	r := start(t, opts, registerLLM(f))
	ctx := testkit.Context(t, 30*time.Second)
	client := penguinv1.NewLLMServiceClient(r.via("in-process"))
	stream, err := client.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("end of stream: %v", err)
	}
	if got := resp.GetMessage().GetOrigin(); got[0] != "first" {
		t.Errorf("the client received %q, want what the server sent", got)
	}

	answer, err := client.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	answer.GetProviders()[0].Name = "changed by the client"
	if kept.GetProviders()[0].GetName() != "kept" {
		t.Errorf("the client changed the server's answer to %q", kept.GetProviders()[0].GetName())
	}
}

// TestInProcessCarriesWhatTheNetworkDoes checks, on both transports, what
// a caller and a handler see of each other besides the messages:
// metadata, headers and trailers, the deadline, the cancellation, and a
// handler's error as a status.
func TestInProcessCarriesWhatTheNetworkDoes(t *testing.T) {
	t.Parallel()
	forTracing(t, testInProcessCarriesWhatTheNetworkDoes)
}

func testInProcessCarriesWhatTheNetworkDoes(t *testing.T, opts grpcserver.Options) {
	type seen struct {
		md       metadata.MD
		deadline bool
		method   string
	}
	seenc := make(chan seen, 1)
	cancelled := make(chan error, 1)
	f := &fakeLLM{
		listProviders: func(ctx context.Context) (*penguinv1.ListProvidersResponse, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			_, deadline := ctx.Deadline()
			method, _ := grpc.Method(ctx)
			seenc <- seen{md: md, deadline: deadline, method: method}
			_ = grpc.SetHeader(ctx, metadata.Pairs("h", "header"))
			_ = grpc.SetTrailer(ctx, metadata.Pairs("t", "trailer"))
			return nil, errors.New("plain error")
		},
		streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
			// Send may see the cancellation already (inprocgrpc, with
			// tracing on, hands the message over, then returns its
			// context's error); a Send that failed otherwise fails the
			// caller's Recv.
			_ = s.Send(&penguinv1.StreamGenerateResponse{})
			<-s.Context().Done()
			cancelled <- s.Context().Err()
			return s.Context().Err()
		},
	}
	r := start(t, opts, registerLLM(f))
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ctx := testkit.Context(t, 30*time.Second)
			client := penguinv1.NewLLMServiceClient(r.via(tr))

			var header, trailer metadata.MD
			_, err := client.ListProviders(metadata.AppendToOutgoingContext(ctx, "k", "v"), &penguinv1.ListProvidersRequest{},
				grpc.Header(&header), grpc.Trailer(&trailer))
			if st, ok := status.FromError(err); !ok || st.Code() != codes.Unknown || st.Message() != "plain error" {
				t.Errorf("ListProviders: %v, want Unknown: plain error", err)
			}
			s := <-seenc
			if got := s.md.Get("k"); len(got) != 1 || got[0] != "v" {
				t.Errorf("the handler saw metadata %v, want k=v", s.md)
			}
			if !s.deadline || s.method != "/penguin.v1.LLMService/ListProviders" {
				t.Errorf("the handler saw deadline %v, method %q", s.deadline, s.method)
			}
			if header.Get("h")[0] != "header" || trailer.Get("t")[0] != "trailer" {
				t.Errorf("the caller got header %v, trailer %v", header, trailer)
			}

			sctx, cancel := context.WithCancel(ctx)
			stream, err := client.StreamGenerate(sctx, &penguinv1.StreamGenerateRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := stream.Recv(); err != nil {
				t.Fatal(err)
			}
			cancel()
			select {
			case err := <-cancelled:
				if !errors.Is(err, context.Canceled) {
					t.Errorf("the handler's context ended with %v, want Canceled", err)
				}
			case <-ctx.Done():
				t.Fatal("the caller's cancellation never reached the handler")
			}
			if _, err := stream.Recv(); status.Code(err) != codes.Canceled {
				t.Errorf("Recv after cancelling: %v, want Canceled", err)
			}
		})
	}
}

// forTracing runs test with tracing off (the default of a process without
// a trace exporter) and on: the in-process channel calls unary handlers
// itself without stats handlers, and through inprocgrpc with them.
func forTracing(t *testing.T, test func(*testing.T, grpcserver.Options)) {
	for _, traced := range []bool{false, true} {
		t.Run(fmt.Sprintf("traced=%v", traced), func(t *testing.T) {
			t.Parallel()
			var opts grpcserver.Options
			if traced {
				opts.TracerProvider = sdktrace.NewTracerProvider()
			}
			test(t, opts)
		})
	}
}
