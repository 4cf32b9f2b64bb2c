package grpcserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// unaryMethod is a registered unary method, as Invoke calls it.
type unaryMethod struct {
	srv     any
	handler grpc.MethodHandler
	// uri is what a caller's per-call credentials are asked metadata for,
	// as inprocgrpc names the call ("inproc:0/service/method").
	uri string
}

// register registers a service's handlers on the channel: on inprocgrpc,
// which serves them when stats handlers must see them, and for Invoke and
// NewStream otherwise.
func (in *inProcess) register(desc *grpc.ServiceDesc, impl any) {
	in.reg.RegisterService(desc, impl)
	if in.unary == nil {
		return
	}
	for _, m := range desc.Methods {
		name := "/" + desc.ServiceName + "/" + m.MethodName
		in.unary[name] = unaryMethod{srv: impl, handler: m.Handler, uri: "inproc:0" + name}
	}
	for _, d := range desc.Streams {
		name := "/" + desc.ServiceName + "/" + d.StreamName
		m := &streamMethod{srv: impl, uri: "inproc:0" + name,
			info: grpc.StreamServerInfo{FullMethod: name, IsClientStream: d.ClientStreams, IsServerStream: d.ServerStreams}}
		if r, ok := impl.(RequestReader); ok && !d.ClientStreams {
			m.readsRequest = r.ReadsRequestOnly(d.StreamName)
		}
		m.call = chainedStreamHandler(in.stream, 0, &m.info, d.Handler)
		in.streams[name] = m
	}
}

// Invoke makes a unary call. Without stats handlers it runs the handler
// on the caller's goroutine, behind the server's interceptor chain: an
// in-process call through inprocgrpc started a goroutine for the handler
// (whose stack then grew, as a new goroutine's does) and another to watch
// the caller's context, and the caller waited on a channel for the
// answer. What the handler sees is what inprocgrpc gave it, and what a
// call over the network gives: the caller's metadata with its
// credentials' added as incoming metadata, the in-process peer, the
// method, a transport stream for headers and trailers, the caller's
// deadline and cancellation, none of the caller's context values (the
// caller's span context excepted, see carrySpan), and the gate's
// semantics (enter, the hard stop).
//
// A handler that does not return when its context ends holds its caller
// up, where inprocgrpc's caller returned at its deadline and left the
// handler running; every handler of ours returns when its context ends,
// as it must over the network too not to hold the server's resources.
// Once it returns, a caller whose context ended gets its context's
// status, as over the network, whatever the handler answered.
func (in *inProcess) Invoke(ctx context.Context, method string, req, resp any, opts ...grpc.CallOption) error {
	if in.unary == nil {
		// Stats handlers see both ends of every call: inprocgrpc calls them.
		// Its caller gets io.EOF, neither answer nor status, when its
		// context ends as the handler returns (the handler's status is
		// dropped then, at random): the call's status is the context's.
		err := in.ch.Invoke(ctx, method, req, resp, opts...)
		if cerr := ctx.Err(); cerr != nil && errors.Is(err, io.EOF) {
			return status.FromContextError(cerr).Err()
		}
		return err
	}
	if !isMessage(req) {
		return status.Error(codes.Internal, "request message is nil")
	}
	if err := in.enter(ctx); err != nil {
		return err
	}
	defer in.calls.Done()
	// Services are registered before Serve, which enter waited for.
	m, ok := in.unary[method]
	if !ok {
		return status.Errorf(codes.Unimplemented, "method %s not implemented", method)
	}
	md, err := incomingMetadata(ctx, m.uri, opts)
	if err != nil {
		return err
	}

	stream := &transportStream{method: method}
	hctx, cancel := in.handlerContext(ctx, md, stream)
	defer cancel()
	answer, err := m.handler(m.srv, hctx, func(out any) error { return protoCopier{}.Copy(out, req) }, in.chain)
	headers, trailers := stream.finish()
	setCallOptions(opts, headers, trailers)
	if cerr := ctx.Err(); cerr != nil {
		return status.FromContextError(cerr).Err()
	}
	if err != nil {
		return wireError(err)
	}
	if !isMessage(answer) {
		return status.Error(codes.Internal, "handler returned neither error nor response message")
	}
	return protoCopier{}.Copy(resp, answer)
}

// handlerContext returns the context of a handler called with the
// caller's context ctx (see callContext), with what the handler finds in
// it: md as its incoming metadata, the in-process peer, the call's
// transport stream ts, and the caller's span context (see carrySpan).
func (in *inProcess) handlerContext(ctx context.Context, md metadata.MD, ts *transportStream) (context.Context, context.CancelFunc) {
	hctx, cancel := in.callContext(ctx)
	hctx = metadata.NewIncomingContext(hctx, md)
	hctx = peer.NewContext(hctx, &inProcessPeer)
	hctx = grpc.NewContextWithServerTransportStream(hctx, ts)
	return in.span(hctx, ctx), cancel
}

// setCallOptions gives the caller what its call options ask for once the
// call has ended: the headers and trailers its handler set, and the peer.
func setCallOptions(opts []grpc.CallOption, headers, trailers metadata.MD) {
	for _, o := range opts {
		switch o := o.(type) {
		case grpc.HeaderCallOption:
			*o.HeaderAddr = headers
		case grpc.TrailerCallOption:
			*o.TrailerAddr = trailers
		case grpc.PeerCallOption:
			*o.PeerAddr = inProcessPeer
		}
	}
}

// callContext returns the context of a handler called with the caller's
// context ctx: it ends when ctx ends or when the server stops hard, has
// ctx's deadline, and holds none of ctx's values, as over the network
// (a caller's values, such as the transport stream of the call it serves,
// are not the handler's). It derives from the hard stop's context rather
// than from ctx behind a wrapper that hides ctx's values, because such a
// wrapper hides ctx's cancellation from the context package too: every
// context derived from it, the handler's own included, would start a
// goroutine to watch it.
//
// The handler's context ends at the caller's deadline by its own timer,
// with DeadlineExceeded, as a handler's over the network; when the
// caller's context ends for its deadline, the handler's is left to its
// timer, which fires at the same deadline, rather than cancelled first,
// which would end it with Canceled.
func (in *inProcess) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var hctx context.Context
	var cancel context.CancelFunc
	d, deadline := ctx.Deadline()
	if deadline {
		hctx, cancel = context.WithDeadline(in.hard, d)
	} else {
		hctx, cancel = context.WithCancel(in.hard)
	}
	if ctx.Done() == nil {
		return hctx, cancel
	}
	stop := context.AfterFunc(ctx, func() {
		if !deadline || !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			cancel()
		}
	})
	return hctx, func() {
		stop()
		cancel()
	}
}

// incomingMetadata returns what the handler of a call from ctx with opts
// finds as incoming metadata: ctx's outgoing metadata and what the call's
// per-call credentials add, keys in lower case, as inprocgrpc and the
// network give it.
func incomingMetadata(ctx context.Context, uri string, opts []grpc.CallOption) (metadata.MD, error) {
	md, _ := metadata.FromOutgoingContext(ctx)
	for _, o := range opts {
		c, ok := o.(grpc.PerRPCCredsCallOption)
		if !ok {
			continue
		}
		kv, err := c.Creds.GetRequestMetadata(ctx, uri)
		if err != nil {
			return nil, err
		}
		if md == nil {
			md = make(metadata.MD, len(kv))
		}
		for k, v := range kv {
			k = strings.ToLower(k)
			md[k] = append(md[k], v)
		}
	}
	if md == nil {
		md = metadata.MD{}
	}
	return md, nil
}

// isMessage reports whether v is a message, not nil.
func isMessage(v any) bool {
	m, ok := v.(proto.Message)
	return ok && m.ProtoReflect().IsValid()
}

// inProcessPeer is the peer of every in-process call, as inprocgrpc names
// it.
var inProcessPeer = peer.Peer{Addr: inProcessAddr{}, AuthInfo: inProcessAddr{}}

// inProcessAddr is the address and the auth info of inProcessPeer.
type inProcessAddr struct{}

func (inProcessAddr) Network() string  { return "inproc" }
func (inProcessAddr) String() string   { return "0" }
func (inProcessAddr) AuthType() string { return "inproc" }

// errSent is a header or trailer set once the call has answered.
var errSent = errors.New("the call has answered")

// transportStream is an in-process call's [grpc.ServerTransportStream]:
// it gathers the headers and trailers its handler sets, for the caller. A
// stream's caller may wait for the headers (see waitHeader).
type transportStream struct {
	method string

	mu                 sync.Mutex
	headers, trailers  metadata.MD
	headersSent, ended bool
	// waiting, made by the first caller to wait for the headers, is
	// closed once they are sent or the call has ended.
	waiting chan struct{}
	// handOver is set when a stream's handler hands its messages over
	// (see HandOver).
	handOver atomic.Bool
}

func (s *transportStream) Method() string { return s.method }

func (s *transportStream) SetHeader(md metadata.MD) error { return s.header(md, false) }

func (s *transportStream) SendHeader(md metadata.MD) error { return s.header(md, true) }

// header adds md to the headers, refused once they are sent; send marks
// them sent.
func (s *transportStream) header(md metadata.MD, send bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headersSent {
		return errSent
	}
	s.headers = join(s.headers, md)
	if send {
		s.headersSent = true
		s.wake()
	}
	return nil
}

func (s *transportStream) SetTrailer(md metadata.MD) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return errSent
	}
	s.trailers = join(s.trailers, md)
	return nil
}

// finish ends the call: what is set from now on is refused. It returns
// the headers and trailers set.
func (s *transportStream) finish() (headers, trailers metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headersSent, s.ended = true, true
	s.wake()
	return s.headers, s.trailers
}

// wake lets those waiting for the headers go on; s.mu is held.
func (s *transportStream) wake() {
	if s.waiting != nil {
		close(s.waiting)
		s.waiting = nil
	}
}

// sent returns the headers, once sent, and the trailers, once the call
// has ended; nil before.
func (s *transportStream) sent() (headers, trailers metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headersSent {
		headers = s.headers
	}
	if s.ended {
		trailers = s.trailers
	}
	return headers, trailers
}

// waitHeader returns the headers once they are sent or the call has
// ended, or ctx's status if it ends first.
func (s *transportStream) waitHeader(ctx context.Context) (metadata.MD, error) {
	s.mu.Lock()
	if s.headersSent {
		defer s.mu.Unlock()
		return s.headers, nil
	}
	if s.waiting == nil {
		s.waiting = make(chan struct{})
	}
	waiting := s.waiting
	s.mu.Unlock()
	select {
	case <-waiting:
		h, _ := s.sent()
		return h, nil
	case <-ctx.Done():
		return nil, status.FromContextError(ctx.Err()).Err()
	}
}

// join adds md's values to to's, making to when it is nil and md is not
// empty.
func join(to, md metadata.MD) metadata.MD {
	if len(md) == 0 {
		return to
	}
	if to == nil {
		to = metadata.MD{}
	}
	for k, v := range md {
		to[k] = append(to[k], v...)
	}
	return to
}

// chainUnary returns the interceptors ics as one, the first outermost, as
// grpc-go chains a server's.
func chainUnary(ics []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	if len(ics) == 0 {
		return nil
	}
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return ics[0](ctx, req, info, chainedHandler(ics, 1, info, handler))
	}
}

// chainedHandler returns the handler that runs ics[i:] in turn, then
// final.
func chainedHandler(ics []grpc.UnaryServerInterceptor, i int, info *grpc.UnaryServerInfo, final grpc.UnaryHandler) grpc.UnaryHandler {
	if i == len(ics) {
		return final
	}
	return func(ctx context.Context, req any) (any, error) {
		return ics[i](ctx, req, info, chainedHandler(ics, i+1, info, final))
	}
}
