package grpcserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
)

// echoDesc is a service of the tests' own with the kinds of stream the
// generated services do not have: Echo (bidirectional) answers each
// request with its value, then ends with fail's status when it is set;
// Join (client-streaming) answers once, with the requests' values joined.
// Both send headers at once and set a trailer.
var echoDesc = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Echo", ServerStreams: true, ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(*echo).echo(ss)
		}},
		{StreamName: "Join", ClientStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(*echo).join(ss)
		}},
	},
}

type echo struct{ fail error }

func (e *echo) echo(ss grpc.ServerStream) error {
	if err := ss.SendHeader(metadata.Pairs("h", "header")); err != nil {
		return err
	}
	ss.SetTrailer(metadata.Pairs("t", "trailer"))
	for {
		in := new(wrapperspb.StringValue)
		err := ss.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		out := &wrapperspb.StringValue{Value: in.GetValue()}
		in.Value = "changed by the handler once received"
		if err := ss.SendMsg(out); err != nil {
			return err
		}
		out.Value = "changed by the handler once sent"
		if e.fail != nil {
			return e.fail
		}
	}
}

func (e *echo) join(ss grpc.ServerStream) error {
	ss.SetTrailer(metadata.Pairs("t", "trailer"))
	var values []string
	for {
		in := new(wrapperspb.StringValue)
		err := ss.RecvMsg(in)
		if errors.Is(err, io.EOF) {
			return ss.SendMsg(&wrapperspb.StringValue{Value: strings.Join(values, "")})
		}
		if err != nil {
			return err
		}
		values = append(values, in.GetValue())
	}
}

// TestInProcessStreamsBothWays checks, on both transports and with
// tracing off and on, a bidirectional and a client-streaming call: each
// side's messages in order and as they were when sent (each side changes
// what it sent and what it received; under -race, a message shared
// between the two would be a race), headers before any message, trailers
// at the end (and both through the call's options), the handler's status, and a caller still sending to a
// handler that has returned.
func TestInProcessStreamsBothWays(t *testing.T) {
	t.Parallel()
	forTracing(t, testInProcessStreamsBothWays)
}

func testInProcessStreamsBothWays(t *testing.T, opts grpcserver.Options) {
	e := &echo{}
	failing := &echo{fail: status.Error(codes.FailedPrecondition, "no more")}
	r := start(t, opts, func(s *grpcserver.Server) {
		s.RegisterService(&echoDesc, e)
		d := echoDesc
		d.ServiceName = "test.Failing"
		s.RegisterService(&d, failing)
	})
	for _, tr := range transports {
		t.Run(tr, func(t *testing.T) {
			ctx := testkit.Context(t, 30*time.Second)
			conn := r.via(tr)

			var header, trailer metadata.MD
			cs, err := conn.NewStream(ctx, &echoDesc.Streams[0], "/test.Echo/Echo", grpc.Header(&header), grpc.Trailer(&trailer))
			if err != nil {
				t.Fatal(err)
			}
			if h, err := cs.Header(); err != nil || h.Get("h")[0] != "header" {
				t.Fatalf("Header before any message: %v, %v", h, err)
			}
			for _, v := range []string{"a", "b", "c"} {
				req := &wrapperspb.StringValue{Value: v}
				if err := cs.SendMsg(req); err != nil {
					t.Fatal(err)
				}
				req.Value = "changed by the caller once sent"
				got := new(wrapperspb.StringValue)
				if err := cs.RecvMsg(got); err != nil {
					t.Fatal(err)
				}
				if got.GetValue() != v {
					t.Errorf("Echo answered %q to %q", got.GetValue(), v)
				}
			}
			if err := cs.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if err := cs.RecvMsg(new(wrapperspb.StringValue)); !errors.Is(err, io.EOF) {
				t.Errorf("Echo's end: %v, want io.EOF", err)
			}
			if got := cs.Trailer().Get("t"); len(got) != 1 || got[0] != "trailer" {
				t.Errorf("Echo's trailers: %v", cs.Trailer())
			}
			if header.Get("h")[0] != "header" || trailer.Get("t")[0] != "trailer" {
				t.Errorf("Echo's call options got header %v, trailer %v", header, trailer)
			}

			js, err := conn.NewStream(ctx, &echoDesc.Streams[1], "/test.Echo/Join")
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range []string{"x", "y", "z"} {
				if err := js.SendMsg(&wrapperspb.StringValue{Value: v}); err != nil {
					t.Fatal(err)
				}
			}
			if err := js.CloseSend(); err != nil {
				t.Fatal(err)
			}
			joined := new(wrapperspb.StringValue)
			if err := js.RecvMsg(joined); err != nil || joined.GetValue() != "xyz" {
				t.Errorf("Join: %q, %v; want xyz", joined.GetValue(), err)
			}

			// The failing handler returns after its first answer; the
			// caller sends on until its SendMsg says the call has ended,
			// and RecvMsg then gives the handler's status.
			fs, err := conn.NewStream(ctx, &echoDesc.Streams[0], "/test.Failing/Echo")
			if err != nil {
				t.Fatal(err)
			}
			// (inprocgrpc, with tracing on, carries the headers through
			// the answers' one place: they are taken first.)
			if _, err := fs.Header(); err != nil {
				t.Fatal(err)
			}
			for err == nil {
				err = fs.SendMsg(&wrapperspb.StringValue{Value: "more"})
			}
			if !errors.Is(err, io.EOF) {
				t.Errorf("SendMsg to a handler that has returned: %v, want io.EOF", err)
			}
			for err = nil; err == nil; {
				err = fs.RecvMsg(new(wrapperspb.StringValue))
			}
			if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || st.Message() != "no more" {
				t.Errorf("the failing handler's status: %v", err)
			}
		})
	}
}

// TestInProcessStreamEnds checks how an in-process stream whose handler
// sends a message and then waits for its context ends: at the caller's
// deadline, as DeadlineExceeded, which the handler's context sees too;
// and, once the server stops gracefully, not before the handler
// returns: a stream in flight drains, and a new one is refused as
// Unavailable once the server has stopped.
func TestInProcessStreamEnds(t *testing.T) {
	t.Parallel()
	forTracing(t, testInProcessStreamEnds)
}

func testInProcessStreamEnds(t *testing.T, opts grpcserver.Options) {
	ctx := testkit.Context(t, 30*time.Second)
	handlerErr := make(chan error, 1)
	release := make(chan struct{})
	f := &fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if err := s.Send(&penguinv1.StreamGenerateResponse{}); err != nil {
			return err
		}
		select {
		case <-s.Context().Done():
			handlerErr <- s.Context().Err()
			return s.Context().Err()
		case <-release:
			return s.Send(&penguinv1.StreamGenerateResponse{})
		}
	}}
	opts.ShutdownTimeout = 20 * time.Second
	r := start(t, opts, func(s *grpcserver.Server) {
		penguinv1.RegisterLLMServiceServer(s, f)
		s.OnShutdown(func(context.Context) { close(release) })
	})
	client := penguinv1.NewLLMServiceClient(r.via("in-process"))

	dctx, stop := context.WithTimeout(ctx, 100*time.Millisecond)
	defer stop()
	stream, err := client.StreamGenerate(dctx, &penguinv1.StreamGenerateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("Recv past the caller's deadline: %v, want DeadlineExceeded", err)
	}
	if err := <-handlerErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the handler's context ended with %v, want DeadlineExceeded", err)
	}

	stream, err = client.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	if err := r.stop(t); err != nil {
		t.Errorf("Serve: %v", err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Errorf("the stream in flight, drained: %v", err)
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("the end of the stream in flight: %v, want io.EOF", err)
	}
	late, err := client.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
	if err == nil {
		_, err = late.Recv()
	}
	if status.Code(err) != codes.Unavailable {
		t.Errorf("a stream opened once the server has stopped: %v, want Unavailable", err)
	}
}

// TestInProcessStreamWaitsForServe checks that a stream opened before
// Serve waits until it starts, as a unary call does.
func TestInProcessStreamWaitsForServe(t *testing.T) {
	t.Parallel()
	ctx := testkit.Context(t, 30*time.Second)
	srv, err := grpcserver.New(grpcserver.Options{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	penguinv1.RegisterLLMServiceServer(srv, &fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		return s.Send(&penguinv1.StreamGenerateResponse{})
	}})
	got := make(chan error, 1)
	go func() {
		stream, err := penguinv1.NewLLMServiceClient(srv.InProcess()).StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
		if err == nil {
			_, err = stream.Recv()
		}
		got <- err
	}()
	select {
	case err := <-got:
		t.Fatalf("the stream ended before Serve: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lisCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lisCtx, lis) }()
	if err := <-got; err != nil {
		t.Errorf("the stream opened before Serve: %v", err)
	}
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestInProcessStreamBoundsASlowCaller checks the in-process streams' flow
// control: a handler that sends as fast as it can to a caller that does
// not receive is held once one message waits, and receives its context's
// end when the caller gives up.
func TestInProcessStreamBoundsASlowCaller(t *testing.T) {
	t.Parallel()
	forTracing(t, testInProcessStreamBoundsASlowCaller)
}

func testInProcessStreamBoundsASlowCaller(t *testing.T, opts grpcserver.Options) {
	var sent atomic.Int64
	ended := make(chan error, 1)
	f := &fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		for {
			if err := s.Send(&penguinv1.StreamGenerateResponse{}); err != nil {
				ended <- err
				return err
			}
			sent.Add(1)
		}
	}}
	r := start(t, opts, registerLLM(f))
	ctx := testkit.Context(t, 30*time.Second)
	sctx, cancel := context.WithCancel(ctx)
	stream, err := penguinv1.NewLLMServiceClient(r.via("in-process")).StreamGenerate(sctx, &penguinv1.StreamGenerateRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatal(err)
	}
	// The handler sends on until one message waits again.
	if err := eventually.Wait(ctx, func() bool { return sent.Load() >= 2 }); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := sent.Load(); n != 2 {
		t.Errorf("the handler sent %d messages to a caller that received one, want 2", n)
	}
	cancel()
	// (inprocgrpc, with tracing on, returns the context's error as it is.)
	if err := <-ended; status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's Send once the caller cancelled: %v, want Canceled", err)
	}
}

// TestInProcessStreamCostsOneGoroutine counts the goroutines of in-process
// streams in flight, with tracing off: one each, its handler's (inprocgrpc
// ran a second one per stream, to watch the caller's context).
func TestInProcessStreamCostsOneGoroutine(t *testing.T) {
	// Not parallel: other tests' goroutines would be counted.
	const streams = 50
	f := &fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if err := s.Send(&penguinv1.StreamGenerateResponse{}); err != nil {
			return err
		}
		<-s.Context().Done()
		return s.Context().Err()
	}}
	r := start(t, grpcserver.Options{}, registerLLM(f))
	ctx := testkit.Context(t, 30*time.Second)
	client := penguinv1.NewLLMServiceClient(r.via("in-process"))
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	before := runtime.NumGoroutine()
	for range streams {
		stream, err := client.StreamGenerate(sctx, &penguinv1.StreamGenerateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	per := float64(runtime.NumGoroutine()-before) / streams
	t.Logf("%.2f goroutines per stream in flight", per)
	if per > 1.1 {
		t.Errorf("%.2f goroutines per stream in flight, want 1", per)
	}

	// Once the server has stopped, no stream worker waits any more.
	cancel()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	var stacks []byte
	err := eventually.Wait(ctx, func() bool {
		stacks = make([]byte, 1<<20)
		stacks = stacks[:runtime.Stack(stacks, true)]
		return !bytes.Contains(stacks, []byte("grpcserver.(*inProcess).worker"))
	})
	if err != nil {
		t.Errorf("stream workers left once the server stopped:\n%s", stacks)
	}
}

// TestInProcessStreamWorkersAreReused checks that in-process streams run
// one after the other, with tracing off, reuse the goroutine of the
// stream before (whose stack has grown already) rather than each start
// one.
func TestInProcessStreamWorkersAreReused(t *testing.T) {
	t.Parallel()
	const streams = 20
	ran := make(chan string, streams)
	f := &fakeLLM{streamGenerate: func(grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		ran <- goroutineID()
		return nil
	}}
	r := start(t, grpcserver.Options{}, registerLLM(f))
	ctx := testkit.Context(t, 30*time.Second)
	client := penguinv1.NewLLMServiceClient(r.via("in-process"))
	goroutines := map[string]bool{}
	for range streams {
		stream, err := client.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
			t.Fatal(err)
		}
		goroutines[<-ran] = true
		// The stream's end reaches its caller before its worker waits
		// for the next.
		time.Sleep(10 * time.Millisecond)
	}
	if len(goroutines) > streams/2 {
		t.Errorf("%d streams run one after the other ran on %d goroutines", streams, len(goroutines))
	}
}

// giveDesc is a server-streaming service of the tests' own whose handler
// sends one frame, handed over (grpcserver.HandOver) when the server is a
// giver that hands over.
var giveDesc = grpc.ServiceDesc{
	ServiceName: "test.Give",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Give", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(*giver).give(ss)
		}},
	},
}

type giver struct {
	handOver bool
	sent     chan *penguinv1.OmniMessage
}

func (g *giver) give(ss grpc.ServerStream) error {
	if err := ss.RecvMsg(new(wrapperspb.StringValue)); err != nil {
		return err
	}
	if g.handOver {
		grpcserver.HandOver(ss.Context())
	}
	m := omni.AssistantText("given")
	g.sent <- m
	return ss.SendMsg(&penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Message{Message: m}})
}

// TestInProcessStreamHandOver checks that a handler that hands its
// messages over gives the in-process caller the message it sent, not a
// copy, on the channel's own streams (tracing off); that one that does
// not gives a copy; and that over TCP, or through inprocgrpc (tracing
// on), HandOver changes nothing.
func TestInProcessStreamHandOver(t *testing.T) {
	t.Parallel()
	forTracing(t, func(t *testing.T, opts grpcserver.Options) {
		traced := opts.TracerProvider != nil
		givers := map[string]*giver{"test.Give": {handOver: true, sent: make(chan *penguinv1.OmniMessage, 1)}, "test.Copy": {sent: make(chan *penguinv1.OmniMessage, 1)}}
		r := start(t, opts, func(s *grpcserver.Server) {
			for name, g := range givers {
				d := giveDesc
				d.ServiceName = name
				s.RegisterService(&d, g)
			}
		})
		for _, tr := range transports {
			for name, g := range givers {
				ctx := testkit.Context(t, 30*time.Second)
				cs, err := r.via(tr).NewStream(ctx, &giveDesc.Streams[0], "/"+name+"/Give")
				if err != nil {
					t.Fatal(err)
				}
				if err := cs.SendMsg(&wrapperspb.StringValue{}); err != nil {
					t.Fatal(err)
				}
				if err := cs.CloseSend(); err != nil {
					t.Fatal(err)
				}
				got := new(penguinv1.StreamGenerateResponse)
				if err := cs.RecvMsg(got); err != nil {
					t.Fatal(err)
				}
				sent := <-g.sent
				if got.GetMessage().GetText().GetText() != "given" {
					t.Errorf("%s via %s: received %v", name, tr, got)
				}
				want := g.handOver && tr == "in-process" && !traced
				if same := got.GetMessage() == sent; same != want {
					t.Errorf("%s via %s (traced %v): received the message sent itself: %v, want %v", name, tr, traced, same, want)
				}
			}
		}
	})
}

// readDesc is a server-streaming service of the tests' own whose handler
// receives a StreamGenerateRequest, reports the first of its new
// messages, and answers with one frame.
var readDesc = grpc.ServiceDesc{
	ServiceName: "test.Read",
	HandlerType: (*any)(nil),
	Streams: []grpc.StreamDesc{
		{StreamName: "Read", ServerStreams: true, Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(interface{ read(grpc.ServerStream) error }).read(ss)
		}},
	},
}

// reader serves readDesc; one whose only is set says that it only reads
// its request (grpcserver.RequestReader).
type reader struct {
	got  chan *penguinv1.OmniMessage
	only bool
}

// readingOnly is a reader that is a grpcserver.RequestReader.
type readingOnly struct{ reader }

func (readingOnly) ReadsRequestOnly(method string) bool { return method == "Read" }

func (r reader) read(ss grpc.ServerStream) error {
	req := new(penguinv1.StreamGenerateRequest)
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	r.got <- req.GetNewMessages()[0]
	return ss.SendMsg(&penguinv1.StreamGenerateResponse{})
}

// startReaders starts a server with two services of readDesc's one
// stream method: test.Reads, whose handler only reads its request
// (grpcserver.RequestReader), and test.Copies, which says nothing; each
// hands the request's first new message to its reader's channel.
func startReaders(t *testing.T, opts grpcserver.Options) (map[string]reader, *running) {
	t.Helper()
	readers := map[string]reader{"test.Reads": {got: make(chan *penguinv1.OmniMessage, 1), only: true}, "test.Copies": {got: make(chan *penguinv1.OmniMessage, 1)}}
	r := start(t, opts, func(s *grpcserver.Server) {
		for name, rd := range readers {
			d := readDesc
			d.ServiceName = name
			if rd.only {
				s.RegisterService(&d, readingOnly{rd})
			} else {
				s.RegisterService(&d, rd)
			}
		}
	})
	return readers, r
}

// readOnce sends req to the reading service name over conn, shared
// (grpcserver.ShareRequest) when share is set, and returns what receiving
// its answer gave.
func readOnce(t *testing.T, conn grpc.ClientConnInterface, name string, share bool, req *penguinv1.StreamGenerateRequest) error {
	t.Helper()
	var callOpts []grpc.CallOption
	if share {
		callOpts = append(callOpts, grpcserver.ShareRequest())
	}
	cs, err := conn.NewStream(testkit.Context(t, 30*time.Second), &readDesc.Streams[0], "/"+name+"/Read", callOpts...)
	if err != nil {
		t.Fatal(err)
	}
	if err := cs.SendMsg(req); err != nil {
		t.Fatal(err)
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return cs.RecvMsg(new(penguinv1.StreamGenerateResponse))
}

// TestInProcessStreamSharedRequest checks that a request crosses without
// a copy only when both sides say they leave it as it is: the caller with
// grpcserver.ShareRequest, the handler as a grpcserver.RequestReader, on
// the channel's own streams (tracing off); over TCP, or through inprocgrpc
// (tracing on), the handler always gets a copy.
func TestInProcessStreamSharedRequest(t *testing.T) {
	t.Parallel()
	forTracing(t, func(t *testing.T, opts grpcserver.Options) {
		traced := opts.TracerProvider != nil
		readers, r := startReaders(t, opts)
		for _, tr := range transports {
			for name, rd := range readers {
				for _, share := range []bool{false, true} {
					sent := omni.UserText("shared?")
					if err := readOnce(t, r.via(tr), name, share, &penguinv1.StreamGenerateRequest{NewMessages: []*penguinv1.OmniMessage{sent}}); err != nil {
						t.Fatal(err)
					}
					got := <-rd.got
					if got.GetText().GetText() != "shared?" {
						t.Errorf("%s via %s: received %v", name, tr, got)
					}
					want := rd.only && share && tr == "in-process" && !traced
					if same := got == sent; same != want {
						t.Errorf("%s via %s (traced %v, shared %v): the handler got the caller's message itself: %v, want %v", name, tr, traced, share, same, want)
					}
				}
			}
		}
	})
}
