package grpcserver

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/fullstorydev/grpchan"
	"github.com/fullstorydev/grpchan/inprocgrpc"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// inProcess is the server's in-process channel: a call made through it
// reaches the registered handler with its messages handed across as Go
// values, copied (see protoCopier and NewStream) and never encoded, with
// no HTTP/2 framing between the two ends. The handlers are those of the
// gRPC server, behind the same interceptor chain; what the network
// transport does besides is done here by the gate (enter, and the hard
// stop's context):
//
//   - a call made before [Server.Serve] waits until it starts, as a dial of
//     a server not yet serving does;
//   - a call made once the graceful stop has begun is refused as
//     Unavailable, as a connection that got GOAWAY refuses it, and the
//     stop waits for the calls in flight, as GracefulStop waits for the
//     network's;
//   - the hard stop cancels the calls still running, as closing their
//     connections does;
//   - a handler's error reaches the caller as the status the network would
//     carry: a status as it is, a context error as Canceled or
//     DeadlineExceeded, anything else as Unknown with its message.
//
// A unary call runs its handler on the caller's goroutine (see Invoke),
// and a stream's handler runs in one goroutine (see NewStream), unless
// stats handlers must see them: then they go through grpchan's
// inprocgrpc, which calls the stats handlers on both ends.
type inProcess struct {
	ch  *inprocgrpc.Channel
	reg grpc.ServiceRegistrar

	// unary and streams hold the methods by full name
	// ("/service/method"), for Invoke and NewStream; they are nil when
	// stats handlers are set, and written only while services are
	// registered, before any call.
	unary   map[string]unaryMethod
	streams map[string]*streamMethod
	// chain is the server's unary interceptor chain, as one interceptor;
	// stream holds its stream interceptors, chained for each method.
	chain  grpc.UnaryServerInterceptor
	stream []grpc.StreamServerInterceptor
	// served is closed when Serve starts, or when the server is closed
	// without being served.
	served     chan struct{}
	servedOnce sync.Once
	// hard ends when the server stops hard; calls in flight end with it.
	hard     context.Context
	stopHard context.CancelFunc

	// carrySpan is set when no stats handler continues the caller's
	// trace: the gate puts the caller's span context in the handler's
	// context, where the network's server handler would have put it, so
	// that what the handler logs or starts is still of the caller's trace.
	carrySpan bool

	// work hands a stream to an idle stream worker (see worker); it is
	// closed, under mu, when the server stops. idle counts the workers
	// waiting, at most maxIdle.
	work    chan *stream
	idle    atomic.Int32
	maxIdle int32

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
}

// newInProcess builds the channel, its handlers behind the interceptor
// chains unary and streaming, both ends of each call seen by the stats
// handlers (so that a trace continues across it as across the network),
// or by none when server is nil (tracing is off).
func newInProcess(unary []grpc.UnaryServerInterceptor, streaming []grpc.StreamServerInterceptor, server, client stats.Handler) *inProcess {
	in := &inProcess{ch: new(inprocgrpc.Channel), served: make(chan struct{}),
		work: make(chan *stream), maxIdle: int32(runtime.GOMAXPROCS(0))}
	in.hard, in.stopHard = context.WithCancel(context.Background())
	in.ch.WithCloner(protoCopier{})
	if server != nil {
		in.ch.WithServerStatsHandler(server).WithClientStatsHandler(client)
	} else {
		in.carrySpan = true
		in.unary = map[string]unaryMethod{}
		in.streams = map[string]*streamMethod{}
		in.chain = chainUnary(unary)
		in.stream = streaming
	}
	in.reg = grpchan.WithStreamInterceptors(
		grpchan.WithUnaryInterceptors(in.ch, append([]grpc.UnaryServerInterceptor{in.gateUnary}, unary...)...),
		append([]grpc.StreamServerInterceptor{in.gateStream}, streaming...)...)
	return in
}

// serve lets the calls waiting for Serve go on.
func (in *inProcess) serve() { in.servedOnce.Do(func() { close(in.served) }) }

// drain refuses new calls and waits for those in flight until ctx ends;
// then it cancels those still running and waits for them to return.
func (in *inProcess) drain(ctx context.Context) {
	in.shut()
	done := make(chan struct{})
	go func() {
		in.calls.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		in.stopHard()
		<-done
	}
}

// close refuses every call from now on and cancels those running.
func (in *inProcess) close() {
	in.shut()
	in.stopHard()
}

// shut refuses calls from now on, and lets the idle stream workers go.
func (in *inProcess) shut() {
	in.serve()
	in.mu.Lock()
	defer in.mu.Unlock()
	if !in.closed {
		in.closed = true
		close(in.work)
	}
}

// enter admits a call, once Serve has started and unless the server is
// stopping; a call admitted must call in.calls.Done when it returns.
func (in *inProcess) enter(ctx context.Context) error {
	if err := in.await(ctx); err != nil {
		return err
	}
	return in.admit()
}

// await waits until Serve has started, and refuses a call once the server
// is stopping.
func (in *inProcess) await(ctx context.Context) error {
	select {
	case <-in.served:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return errStopping
	}
	return nil
}

// admit admits a call that awaited Serve, unless the server is stopping;
// a call admitted must call in.calls.Done when it returns.
func (in *inProcess) admit() error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return errStopping
	}
	in.calls.Add(1)
	return nil
}

// errStopping refuses a call once the server has begun to stop.
var errStopping = status.Error(codes.Unavailable, "the server is stopping")

// withHardStop returns ctx, cancelled as well when the server stops hard.
func (in *inProcess) withHardStop(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(in.hard, cancel)
	return ctx, func() { stop(); cancel() }
}

func (in *inProcess) gateUnary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	if err := in.enter(ctx); err != nil {
		return nil, err
	}
	defer in.calls.Done()
	ctx, release := in.withHardStop(in.span(ctx, inprocgrpc.ClientContext(ctx)))
	defer release()
	resp, err := handler(ctx, req)
	return resp, wireError(err)
}

func (in *inProcess) gateStream(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	if err := in.enter(ss.Context()); err != nil {
		return err
	}
	defer in.calls.Done()
	ctx, release := in.withHardStop(in.span(ss.Context(), inprocgrpc.ClientContext(ss.Context())))
	defer release()
	return wireError(handler(srv, contextStream{ServerStream: ss, ctx: ctx}))
}

// span returns the handler's context ctx with the span context of
// caller, the caller's context, when the channel carries it (see
// carrySpan) and the caller has one.
func (in *inProcess) span(ctx, caller context.Context) context.Context {
	if !in.carrySpan {
		return ctx
	}
	if sc := trace.SpanContextFromContext(caller); sc.IsValid() {
		return trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return ctx
}

// contextStream is a server stream with another context.
type contextStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s contextStream) Context() context.Context { return s.ctx }

// wireError is err as a call's status, the way grpc-go's server turns a
// handler's error into the status it sends.
func wireError(err error) error {
	if err == nil {
		return nil
	}
	if st, ok := status.FromError(err); ok {
		return st.Err()
	}
	return status.FromContextError(err).Err()
}

// protoCopier copies the messages of in-process calls. A copy is needed
// because over the network each side has its own: a handler may change
// its request, and a caller may reuse a message once sent (the
// environment service recycles its output buffers once a message is
// written out). A message sent on a stream through inprocgrpc is cloned
// when sent, into a value nothing else holds; the receiver takes that
// value over as it is (see move), as the channel's own streams do. A
// unary call's request and answer are copied once, into the value the
// other side gives.
type protoCopier struct{}

// sent is a stream message cloned at SendMsg, which only its receiver
// will see.
type sent struct{ m proto.Message }

func (protoCopier) Clone(in any) (any, error) {
	m, ok := in.(proto.Message)
	if !ok {
		return nil, status.Errorf(codes.Internal, "in-process call: %T is not a protobuf message", in)
	}
	return sent{proto.Clone(m)}, nil
}

func (protoCopier) Copy(out, in any) error {
	dst, ok := out.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "in-process call: %T is not a protobuf message", out)
	}
	if s, ok := in.(sent); ok {
		return move(dst, s.m)
	}
	src, ok := in.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "in-process call: %T is not a protobuf message", in)
	}
	proto.Reset(dst)
	proto.Merge(dst, src)
	return nil
}
