package grpcserver

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"

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

// register registers a service's handlers on the channel: its streams,
// and its unary methods when stats handlers must see them, on inprocgrpc;
// its other unary methods for Invoke.
func (in *inProcess) register(desc *grpc.ServiceDesc, impl any) {
	in.reg.RegisterService(desc, impl)
	if in.unary == nil {
		return
	}
	for _, m := range desc.Methods {
		name := "/" + desc.ServiceName + "/" + m.MethodName
		in.unary[name] = unaryMethod{srv: impl, handler: m.Handler, uri: "inproc:0" + name}
	}
}

// NewStream opens a stream through inprocgrpc, whose handler runs in a
// goroutine of its own.
func (in *inProcess) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	cs, err := in.ch.NewStream(ctx, desc, method, opts...)
	if err != nil || desc.ClientStreams {
		return cs, err
	}
	return requestStream{cs}, nil
}

// requestStream is the client end of a stream whose caller sends one
// request (a server-streaming call): the generated client sends it right
// after opening the stream and returns SendMsg's error as the call's.
// inprocgrpc's SendMsg returns io.EOF when the handler has already ended,
// which it has when an interceptor refused the call (auth) before the
// request was sent: the caller then got io.EOF, a clean end, instead of
// the refusal. Over the network the request goes out with the call's
// headers, before the server can answer. Here that io.EOF is dropped, as
// grpc-go's SendMsg says to do: the call's status is what RecvMsg returns.
type requestStream struct{ grpc.ClientStream }

func (s requestStream) SendMsg(m any) error {
	if err := s.ClientStream.SendMsg(m); !errors.Is(err, io.EOF) {
		return err
	}
	return nil
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
		return in.ch.Invoke(ctx, method, req, resp, opts...)
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

	hctx, cancel := in.callContext(ctx)
	defer cancel()
	stream := &unaryStream{method: method}
	hctx = metadata.NewIncomingContext(hctx, md)
	hctx = peer.NewContext(hctx, &inProcessPeer)
	hctx = grpc.NewContextWithServerTransportStream(hctx, stream)
	hctx = in.span(hctx, ctx)
	answer, err := m.handler(m.srv, hctx, func(out any) error { return protoCopier{}.Copy(out, req) }, in.chain)
	headers, trailers := stream.finish()

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

// callContext returns the context of a handler called with the caller's
// context ctx: it ends when ctx ends or when the server stops hard, has
// ctx's deadline, and holds none of ctx's values, as over the network
// (a caller's values, such as the transport stream of the call it serves,
// are not the handler's). It derives from the hard stop's context rather
// than from ctx behind a wrapper that hides ctx's values, because such a
// wrapper hides ctx's cancellation from the context package too: every
// context derived from it, the handler's own included, would start a
// goroutine to watch it.
func (in *inProcess) callContext(ctx context.Context) (context.Context, context.CancelFunc) {
	var hctx context.Context
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok {
		hctx, cancel = context.WithDeadline(in.hard, d)
	} else {
		hctx, cancel = context.WithCancel(in.hard)
	}
	if ctx.Done() == nil {
		return hctx, cancel
	}
	stop := context.AfterFunc(ctx, cancel)
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

// unaryStream is a unary call's [grpc.ServerTransportStream]: it gathers
// the headers and trailers its handler sets, for the caller.
type unaryStream struct {
	method string

	mu                 sync.Mutex
	headers, trailers  metadata.MD
	headersSent, ended bool
}

func (s *unaryStream) Method() string { return s.method }

func (s *unaryStream) SetHeader(md metadata.MD) error { return s.header(md, false) }

func (s *unaryStream) SendHeader(md metadata.MD) error { return s.header(md, true) }

// header adds md to the headers, refused once they are sent; send marks
// them sent.
func (s *unaryStream) header(md metadata.MD, send bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.headersSent {
		return errSent
	}
	s.headers = join(s.headers, md)
	s.headersSent = send
	return nil
}

func (s *unaryStream) SetTrailer(md metadata.MD) error {
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
func (s *unaryStream) finish() (headers, trailers metadata.MD) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.headersSent, s.ended = true, true
	return s.headers, s.trailers
}

// join adds md's values to to's, making to when it is nil.
func join(to, md metadata.MD) metadata.MD {
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
