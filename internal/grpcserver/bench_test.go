package grpcserver_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
)

// BenchmarkRoundTrip measures a trivial unary call (ListProviders, empty
// answer) through the whole plumbing, token and interceptors included,
// over TCP loopback (the baseline: how the all-in-one engine reached its
// own services before) and over the in-process channel, alternating
// the two so that both see the same machine. A unix socket is measured
// too, as the other way to avoid TCP. It reports each one's mean in µs
// and in-process/tcp.
func BenchmarkRoundTrip(b *testing.B) {
	srv, tcp := serveBench(b)
	// The unix socket is served by the same gRPC server, beside the other
	// two, and stops with it.
	sock := filepath.Join(b.TempDir(), "grpc.sock")
	unix, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = srv.GRPC().Serve(unix) }()

	client := func(target string) penguinv1.LLMServiceClient {
		conn, err := grpcclient.New(target, grpcclient.Options{Token: "t"})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = conn.Close() })
		return penguinv1.NewLLMServiceClient(conn)
	}
	sides := []struct {
		name   string
		client penguinv1.LLMServiceClient
		total  time.Duration
	}{
		{name: "tcp", client: client(tcp.Addr().String())},
		{name: "in-process", client: penguinv1.NewLLMServiceClient(grpcclient.NewInProcess(srv.InProcess(), grpcclient.Options{Token: "t"}))},
		{name: "unix", client: client("unix://" + sock)},
	}
	callCtx, stop := context.WithTimeout(context.Background(), 10*time.Minute)
	defer stop()
	call := func(c penguinv1.LLMServiceClient) {
		if _, err := c.ListProviders(callCtx, &penguinv1.ListProvidersRequest{}, grpc.WaitForReady(true)); err != nil {
			b.Fatal(err)
		}
	}
	// Connect and warm up every side first.
	for _, s := range sides {
		for range 100 {
			call(s.client)
		}
	}
	n := 0
	for i := 0; b.Loop(); i++ {
		// Rotate the order so that no side always runs first.
		for j := range sides {
			s := &sides[(i+j)%len(sides)]
			start := time.Now()
			call(s.client)
			s.total += time.Since(start)
		}
		n++
	}
	mean := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(n) / 1e3 }
	for _, s := range sides {
		b.ReportMetric(mean(s.total), s.name+"-µs")
	}
	b.ReportMetric(float64(sides[1].total)/float64(sides[0].total), "in-process/tcp")
	b.ReportMetric(float64(sides[2].total)/float64(sides[0].total), "unix/tcp")
	_ = os.Remove(sock)
}

// BenchmarkInProcessUnary measures the same call as BenchmarkRoundTrip
// through the in-process channel alone, so that its allocations per call
// (-benchmem) are the channel's and the interceptors', with nothing of
// the network's in them.
func BenchmarkInProcessUnary(b *testing.B) {
	srv, _ := serveBench(b)
	client := penguinv1.NewLLMServiceClient(grpcclient.NewInProcess(srv.InProcess(), grpcclient.Options{Token: "t"}))
	// A caller's context, as the engine's: cancellable, with a deadline.
	callCtx, stop := context.WithTimeout(context.Background(), 10*time.Minute)
	defer stop()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := client.ListProviders(callCtx, &penguinv1.ListProvidersRequest{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInProcessStream measures a server-streaming call through the
// in-process channel, token and interceptors included: the request, then
// benchFrames messages of a model's streamed answer, received to the end,
// each copied for the caller or handed over (grpcserver.HandOver, as the
// llm service does). Its allocations per call (-benchmem) are the
// channel's and the interceptors'.
func BenchmarkInProcessStream(b *testing.B) {
	for _, handOver := range []bool{false, true} {
		b.Run(fmt.Sprintf("handover=%v", handOver), func(b *testing.B) {
			benchmarkInProcessStream(b, func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
				if handOver {
					grpcserver.HandOver(s.Context())
				}
				return streamFrames(s)
			})
		})
	}
}

func benchmarkInProcessStream(b *testing.B, streamGenerate func(grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error) {
	srv, _ := serveBenchWith(b, streamGenerate)
	client := penguinv1.NewLLMServiceClient(grpcclient.NewInProcess(srv.InProcess(), grpcclient.Options{Token: "t"}))
	callCtx, stop := context.WithTimeout(context.Background(), 10*time.Minute)
	defer stop()
	req := &penguinv1.StreamGenerateRequest{Model: &penguinv1.ModelRef{Provider: "bench", ModelId: "bench"}}
	b.ReportAllocs()
	for b.Loop() {
		stream, err := client.StreamGenerate(callCtx, req)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != benchFrames {
			b.Fatalf("received %d messages, want %d", n, benchFrames)
		}
	}
}

// benchFrames is how many messages BenchmarkInProcessStream's handler
// sends: a short answer's deltas, about what a model's turn streams.
const benchFrames = 16

// streamFrames sends benchFrames deltas of a text.
func streamFrames(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
	for range benchFrames {
		if err := s.Send(&penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{
			Message: omni.PartialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, "a few words "),
		}}); err != nil {
			return err
		}
	}
	return nil
}

// serveBench serves the fake LLM service behind the whole server (token
// and interceptors) on a TCP loopback port until the benchmark ends. Its
// tracer provider is a no-op one, as a process without a trace exporter
// has (telemetry.Setup).
func serveBench(b *testing.B) (*grpcserver.Server, net.Listener) {
	return serveBenchWith(b, streamFrames)
}

// serveBenchWith is serveBench with streamGenerate as the fake's
// StreamGenerate.
func serveBenchWith(b *testing.B, streamGenerate func(grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error) (*grpcserver.Server, net.Listener) {
	return serveBenchLLM(b, &fakeLLM{streamGenerate: streamGenerate})
}

// serveBenchLLM is serveBench with llm as the server's LLMService.
func serveBenchLLM(b *testing.B, llm penguinv1.LLMServiceServer) (*grpcserver.Server, net.Listener) {
	srv, err := grpcserver.New(grpcserver.Options{Name: "bench", AuthToken: "t", TracerProvider: noop.NewTracerProvider(), Registerer: prometheus.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	penguinv1.RegisterLLMServiceServer(srv, llm)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, lis)
	}()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	return srv, lis
}

// readingLLM is a fakeLLM whose StreamGenerate only reads its request
// (grpcserver.RequestReader), as the llm service's does.
type readingLLM struct{ *fakeLLM }

func (readingLLM) ReadsRequestOnly(method string) bool { return method == "StreamGenerate" }

// BenchmarkInProcessSharedRequest measures a model turn's request in a
// long session: a StreamGenerateRequest whose history holds 50 or 200
// messages (a quarter each user text, assistant text, tool call and tool
// output of a few hundred bytes), sent through the in-process channel to
// a handler that answers with its outcome alone, copied (proto.Clone, as
// before ShareRequest) or shared (the caller's ShareRequest, the
// handler's RequestReader).
func BenchmarkInProcessSharedRequest(b *testing.B) {
	for _, n := range []int{50, 200} {
		for _, shared := range []bool{false, true} {
			b.Run(fmt.Sprintf("history=%d/shared=%v", n, shared), func(b *testing.B) {
				srv, _ := serveBenchLLM(b, readingLLM{&fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
					return s.Send(&penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}}})
				}}})
				ctx := b.Context()
				client := penguinv1.NewLLMServiceClient(grpcclient.NewInProcess(srv.InProcess(), grpcclient.Options{Token: "t"}))
				req := &penguinv1.StreamGenerateRequest{Model: &penguinv1.ModelRef{Provider: "bench", ModelId: "bench"}, History: benchHistory(n),
					NewMessages: []*penguinv1.OmniMessage{omni.UserText("and now?")}, SystemPrompt: "be brief"}
				var opts []grpc.CallOption
				if shared {
					opts = append(opts, grpcserver.ShareRequest())
				}
				b.ReportAllocs()
				for b.Loop() {
					stream, err := client.StreamGenerate(ctx, req, opts...)
					if err != nil {
						b.Fatal(err)
					}
					for {
						if _, err := stream.Recv(); errors.Is(err, io.EOF) {
							break
						} else if err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}

// benchHistory is a session's history of n messages.
func benchHistory(n int) []*penguinv1.OmniMessage {
	h := make([]*penguinv1.OmniMessage, 0, n)
	for i := range n {
		id := fmt.Sprintf("call-%d", i/4)
		switch i % 4 {
		case 0:
			h = append(h, omni.UserText("Please look at the file and tell me what the function on line 40 does."))
		case 1:
			h = append(h, omni.AssistantText("Let me read the file first, then I will explain the function and what calls it."))
		case 2:
			h = append(h, omni.ToolCall(id, "read_file", `{"path":"internal/grpcserver/inprocess_stream.go","offset":40,"limit":40}`))
		default:
			h = append(h, omni.ToolCallOutput(id, string(make([]byte, 400)), penguinv1.StopReason_STOP_REASON_COMPLETED))
		}
	}
	return h
}
