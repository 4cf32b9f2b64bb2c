package grpcserver

import (
	"context"
	"errors"
	"io"
	"reflect"
	"sync"
	"sync/atomic"

	"github.com/penguin-agent/penguin/internal/enumcheck"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// streamMethod is a registered streaming method, as NewStream calls it.
type streamMethod struct {
	srv  any
	info grpc.StreamServerInfo
	// call is the method's handler behind the server's stream interceptor
	// chain, chained once when the method is registered: a stream's
	// handler and info are the method's, so unlike a unary call's, its
	// chain is the same for every call.
	call grpc.StreamHandler
	// uri is what a caller's per-call credentials are asked metadata for
	// (see unaryMethod).
	uri string
	// readsRequest is set for a server-streaming method whose handler
	// only reads its request (see RequestReader).
	readsRequest bool
}

// RequestReader is implemented by a service some of whose
// server-streaming handlers only read the request they receive: they
// change no part of it (no field, no submessage, no list, no byte slice
// in place), from the time they receive it to the time they return, and
// keep no part of it that something else changes later. A caller in the
// same process that promises as much (ShareRequest) then hands such a
// handler its request without a copy (see ShareRequest).
type RequestReader interface {
	// ReadsRequestOnly reports whether the handler of the service's
	// stream method named method (as the service descriptor names it,
	// such as "StreamGenerate") only reads its request.
	ReadsRequestOnly(method string) bool
}

// ShareRequest is a call option by which the caller of a server-streaming
// method promises that it changes no part of the request it sends (no
// field, no submessage, no list element, no byte slice in place) from the
// time it sends it on, as long as anything may read it: it may keep the
// request's parts and read them, as the handler does, but whatever it
// changes later it changes in a copy of its own. It promises too that
// every enum value in the request was checked where it entered the
// process (internal/enumcheck) or set by the process's own code. When the
// method's handler only reads its request (RequestReader), the in-process
// channel's own streams (tracing off) then give the handler a shallow
// copy of the caller's request rather than a proto.Clone of it: the two
// sides share its parts (its submessages, lists and bytes), and neither
// changes them; and the enum check lets it through unwalked
// (enumcheck.Vouch). The llm service's StreamGenerate is the one: its
// request carries the session's whole history at every model turn, and
// its copy, then its walk, grew with the session. Over the network and
// through inprocgrpc (tracing on) a copy is made and checked anyway and
// the option does nothing; it is a [grpc.EmptyCallOption] for grpc-go.
func ShareRequest() grpc.CallOption { return shareRequest{} }

type shareRequest struct{ grpc.EmptyCallOption }

// sharesRequest reports whether opts hold ShareRequest.
func sharesRequest(opts []grpc.CallOption) bool {
	for _, o := range opts {
		if _, ok := o.(shareRequest); ok {
			return true
		}
	}
	return false
}

// NewStream opens a stream. Without stats handlers its handler runs in
// one goroutine (a stream worker's, see worker), behind the server's
// stream interceptor chain, and the two ends hand each other messages
// through a channel; with them, the stream goes through inprocgrpc, whose
// stats handlers keep spans right.
//
// inprocgrpc ran the handler in a goroutine too, but its context, derived
// from one that hides the caller's values, hid the caller's cancellation
// from the context package, which then started a second goroutine per
// stream to watch it; and it sent headers, messages, trailers and the
// status as frames through the channels, a hand-off each. Here the
// handler's context derives from the hard stop's, as a unary call's does
// (see callContext): one goroutine per stream in flight, the one that
// runs its handler; only messages cross the channel, and the rest is read
// once the channel is closed.
//
// A server-streaming call's handler starts when its request is sent (or
// when the caller first receives, asks for headers or closes its side),
// with the request already in place: nothing hands the request across
// and nothing can end the handler before it was sent, so a call refused
// by an interceptor ends with the refusal, as over the network (see
// requestStream). Client-streaming and bidirectional calls start at once.
//
// Flow control: one message at most waits in the channel, and a handler
// sending the next waits until the caller has received it (or the call
// ends), so a slow caller holds at most two copies of its stream's
// messages besides those it has received: the one waiting and the one
// being sent. The same holds for the requests of a client stream.
//
// Messages are copied once, by proto.Clone at SendMsg, into a value that
// only the receiver will see, which RecvMsg then moves into the
// receiver's message (see move): over the network each side has its own,
// and a sender may touch what it sent once SendMsg returns (reuse a
// message, fill a buffer it shares), while the receiver owns what it
// received. A handler that lets go of what it sends says so
// with HandOver, and its messages then cross without the copy; a request
// that neither its caller nor its handler changes (ShareRequest,
// RequestReader) crosses without one too, its parts shared.
func (in *inProcess) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if in.streams == nil {
		cs, err := in.ch.NewStream(ctx, desc, method, opts...)
		if err != nil || desc.ClientStreams {
			return cs, err
		}
		return requestStream{cs}, nil
	}
	if err := in.await(ctx); err != nil {
		return nil, err
	}
	// Services are registered before Serve, which await waited for.
	m, ok := in.streams[method]
	if !ok {
		return nil, status.Errorf(codes.Unimplemented, "method %s not implemented", method)
	}
	md, err := incomingMetadata(ctx, m.uri, opts)
	if err != nil {
		return nil, err
	}
	s := &stream{in: in, m: m, ctx: ctx, opts: opts, md: md, out: make(chan proto.Message, 1),
		shared: m.readsRequest && sharesRequest(opts)}
	s.ts.method = method
	if m.info.IsClientStream {
		s.requests = make(chan proto.Message, 1)
		s.ended = make(chan struct{})
		s.started.Store(true)
		s.start()
	}
	return s, nil
}

// requestStream is the client end, through inprocgrpc, of a stream whose
// caller sends one request (a server-streaming call): the generated
// client sends it right after opening the stream and returns SendMsg's
// error as the call's. inprocgrpc's SendMsg returns io.EOF when the
// handler has already ended, which it has when an interceptor refused the
// call (auth) before the request was sent: the caller then got io.EOF, a
// clean end, instead of the refusal. Over the network the request goes
// out with the call's headers, before the server can answer. Here that
// io.EOF is dropped, as grpc-go's SendMsg says to do: the call's status
// is what RecvMsg returns.
type requestStream struct{ grpc.ClientStream }

func (s requestStream) SendMsg(m any) error {
	if err := s.ClientStream.SendMsg(m); !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// stream is an in-process stream: its methods are the caller's end (a
// [grpc.ClientStream]), serverStream{s} the handler's.
type stream struct {
	in   *inProcess
	m    *streamMethod
	ctx  context.Context // the caller's
	opts []grpc.CallOption
	md   metadata.MD // the handler's incoming metadata
	ts   transportStream

	// out carries the handler's messages to the caller; the handler's
	// goroutine closes it when the handler has returned, under sendMu.
	out chan proto.Message
	// requests carries a client stream's requests to the handler; the
	// caller closes it at CloseSend. It is nil for a server-streaming
	// call, whose one request is req, set before the handler starts.
	requests chan proto.Message
	req      proto.Message
	// shared is set when req is the caller's request itself, which
	// neither side changes (see ShareRequest), rather than a copy.
	shared bool
	// ended, made for client streams, is closed when the handler has
	// returned, so that a caller's SendMsg does not wait for it then.
	ended chan struct{}

	started atomic.Bool
	// status is the call's status, set before out is closed.
	status error

	// The handler's side.
	hctx      context.Context
	release   context.CancelFunc
	sendMu    sync.Mutex
	closed    bool // out is closed, under sendMu
	headersUp bool // the first message sent the headers
	received  bool // a server-streaming call's request was received

	// The caller's side: final is what RecvMsg returns once the call has
	// ended, by the goroutine that receives; sendClosed is set by the one
	// that sends.
	final      error
	sendClosed bool
}

// start starts the handler, unless the server has begun to stop since
// the stream was opened: then the stream ends with the refusal. The
// caller has won s.started. A shared request is one its caller vouches
// for (see ShareRequest): the enum check does not walk it.
func (s *stream) start() {
	s.hctx, s.release = s.in.handlerContext(s.ctx, s.md, &s.ts)
	if s.shared {
		s.hctx = enumcheck.Vouch(s.hctx)
	}
	if err := s.in.dispatch(s); err != nil {
		s.release()
		s.end(err)
	}
}

// dispatch admits s and has its handler run by an idle stream worker, or
// by a new one when none waits, unless the server is stopping.
func (in *inProcess) dispatch(s *stream) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.closed {
		return errStopping
	}
	in.calls.Add(1)
	select {
	case in.work <- s:
	default:
		go in.worker(s)
	}
	return nil
}

// worker runs the handler of s, then waits for the next stream's while
// fewer than maxIdle workers wait, until the server stops. A new
// goroutine's stack starts small and grows, copied at each step, as deep
// as a handler goes (the llm service's HTTP client and JSON decoder, the
// environment's tools): 0.1 ms of CPU a task, a third of all stack growth,
// when each stream had a goroutine of its own. A worker keeps its stack
// from one stream to the next, as grpc-go's stream workers do (the
// garbage collector shrinks an idle one's by half at each cycle). An
// in-flight stream still has one goroutine, the worker that runs it.
func (in *inProcess) worker(s *stream) {
	for {
		s.run()
		if in.idle.Add(1) > in.maxIdle {
			in.idle.Add(-1)
			return
		}
		next, ok := <-in.work
		in.idle.Add(-1)
		if !ok {
			return
		}
		s = next
	}
}

// startOnce starts the handler unless something else has.
func (s *stream) startOnce() {
	if !s.started.Load() && s.started.CompareAndSwap(false, true) {
		s.start()
	}
}

// run runs the handler behind the interceptor chain, then ends the call:
// its context first, as grpc-go cancels a call's context once the handler
// has returned, then its stream.
func (s *stream) run() {
	defer s.in.calls.Done()
	err := s.m.call(s.m.srv, serverStream{s})
	s.release()
	s.end(wireError(err))
}

// end sets the call's status and closes its stream: the caller receives
// what is left in out, then the status.
func (s *stream) end(err error) {
	s.status = err
	s.ts.finish()
	s.sendMu.Lock()
	s.closed = true
	close(s.out)
	s.sendMu.Unlock()
	if s.ended != nil {
		close(s.ended)
	}
}

// SendMsg sends a request: a server-streaming call's one request starts
// its handler; a client stream's wait for room (see NewStream).
func (s *stream) SendMsg(m any) error {
	msg, err := message(m)
	if err != nil {
		return err
	}
	if s.requests == nil {
		if !s.started.CompareAndSwap(false, true) {
			return status.Error(codes.Internal, "SendMsg called after CloseSend")
		}
		if s.shared {
			s.req = shallowCopy(msg)
		} else {
			s.req = proto.Clone(msg)
		}
		s.start()
		return nil
	}
	if s.sendClosed {
		return status.Error(codes.Internal, "SendMsg called after CloseSend")
	}
	// As grpc-go's, a SendMsg that cannot send returns io.EOF, and the
	// call's status is what RecvMsg returns.
	select {
	case s.requests <- proto.Clone(msg):
		return nil
	case <-s.ended:
		return io.EOF
	case <-s.ctx.Done():
		return io.EOF
	}
}

// CloseSend ends the requests; a server-streaming call without its
// request then starts, and its handler is told that it has none.
func (s *stream) CloseSend() error {
	if s.requests == nil {
		s.startOnce()
		return nil
	}
	if !s.sendClosed {
		s.sendClosed = true
		close(s.requests)
	}
	return nil
}

// RecvMsg receives the handler's next message into m; once the call has
// ended, it returns io.EOF for a call that succeeded and the call's
// status otherwise: the caller's context's, when it ended first.
func (s *stream) RecvMsg(m any) error {
	if s.final != nil {
		return s.final
	}
	s.startOnce()
	c, err := s.next()
	if err != nil {
		return err
	}
	if err := move(m, c); err != nil {
		return err
	}
	if s.m.info.IsServerStream {
		return nil
	}
	// A call with one answer: its status follows the answer.
	if _, err := s.next(); err == nil {
		return s.finish(status.Error(codes.Internal, "the handler sent more than one answer"))
	} else if err != io.EOF {
		return err
	}
	return nil
}

// next returns the handler's next message, or the call's end (see
// RecvMsg).
func (s *stream) next() (proto.Message, error) {
	var c proto.Message
	var ok bool
	select {
	case c, ok = <-s.out:
	case <-s.ctx.Done():
	}
	if err := s.ctx.Err(); err != nil {
		return nil, s.finish(status.FromContextError(err).Err())
	}
	if !ok {
		if s.status != nil {
			return nil, s.finish(s.status)
		}
		return nil, s.finish(io.EOF)
	}
	return c, nil
}

// finish ends the call on the caller's side with err, which RecvMsg
// returns from now on, and gives the caller what its call options ask
// for.
func (s *stream) finish(err error) error {
	s.final = err
	headers, trailers := s.ts.sent()
	setCallOptions(s.opts, headers, trailers)
	return err
}

// Header waits for the headers, sent by the handler or by its first
// message, or for the end of the call (nil headers and nil error, as
// grpc-go's when the call ended without headers).
func (s *stream) Header() (metadata.MD, error) {
	s.startOnce()
	return s.ts.waitHeader(s.ctx)
}

// Trailer returns the trailers once the call has ended.
func (s *stream) Trailer() metadata.MD {
	_, trailers := s.ts.sent()
	return trailers
}

func (s *stream) Context() context.Context { return s.ctx }

// serverStream is the handler's end of a stream.
type serverStream struct{ s *stream }

func (ss serverStream) Context() context.Context { return ss.s.hctx }

func (ss serverStream) SetHeader(md metadata.MD) error { return ss.s.ts.SetHeader(md) }

func (ss serverStream) SendHeader(md metadata.MD) error { return ss.s.ts.SendHeader(md) }

func (ss serverStream) SetTrailer(md metadata.MD) { _ = ss.s.ts.SetTrailer(md) }

// HandOver declares that the stream handler whose context is ctx hands
// each message it sends over to the caller: once SendMsg has a message,
// the handler neither changes it nor reads it again, and keeps no part of
// it (a submessage, a byte slice) that it changes or reads later. The
// in-process channel's streams then give the caller the message itself
// rather than a copy: proto.Clone of a small frame is some 320 bytes in
// six allocations, and a model's turn streams a frame a delta (see
// docs/performance.md). Elsewhere (over the network, through inprocgrpc
// when a stats handler sees the call, for a unary call) it does nothing,
// because a copy is made there anyway.
func HandOver(ctx context.Context) {
	if ts, ok := grpc.ServerTransportStreamFromContext(ctx).(*transportStream); ok {
		ts.handOver.Store(true)
	}
}

// SendMsg sends m to the caller, a copy of it unless the handler hands
// its messages over (see HandOver), once the caller has received the
// message before (see NewStream), or returns the call's context's status
// if it ends first.
func (ss serverStream) SendMsg(m any) error {
	s := ss.s
	msg, err := message(m)
	if err != nil {
		return err
	}
	if !s.headersUp {
		s.headersUp = true
		_ = s.ts.SendHeader(nil)
	}
	c := msg
	if !s.ts.handOver.Load() {
		c = proto.Clone(msg)
	}
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if s.closed {
		return errSent
	}
	select {
	case s.out <- c:
		return nil
	case <-s.hctx.Done():
		return status.FromContextError(s.hctx.Err()).Err()
	}
}

// RecvMsg receives the caller's next request into m: io.EOF once the
// caller has closed its side.
func (ss serverStream) RecvMsg(m any) error {
	s := ss.s
	if s.requests == nil {
		if s.received {
			return io.EOF
		}
		s.received = true
		if s.req == nil {
			return status.Error(codes.Internal, "cardinality violation: received no request message from non-client-streaming RPC")
		}
		req := s.req
		s.req = nil
		return move(m, req)
	}
	select {
	case c, ok := <-s.requests:
		if !ok {
			return io.EOF
		}
		return move(m, c)
	case <-s.hctx.Done():
		return status.FromContextError(s.hctx.Err()).Err()
	}
}

// message returns m as a message to send, refused when it is none.
func message(m any) (proto.Message, error) {
	msg, ok := m.(proto.Message)
	if !ok || !msg.ProtoReflect().IsValid() {
		return nil, status.Errorf(codes.Internal, "in-process call: %T is not a message to send", m)
	}
	return msg, nil
}

// shallowCopy returns a new message of m's type whose fields are m's,
// the same submessages, lists and bytes: a shared request's parts, which
// neither side changes (see ShareRequest), in a value of its own that
// move may then take over. It goes through reflection, field by field,
// rather than copying the struct, because a struct copy reads m's
// internal state (its cached size), which protobuf lets a concurrent
// reader of m (the caller encoding it) write.
func shallowCopy(m proto.Message) proto.Message {
	src := m.ProtoReflect()
	dst := src.New()
	src.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
		dst.Set(fd, v)
		return true
	})
	if u := src.GetUnknown(); len(u) > 0 {
		dst.SetUnknown(u)
	}
	return dst.Interface()
}

// move makes dst, a message of src's type, what src is, without copying
// it again: src is a copy made for its receiver, or a message its sender
// handed over (see HandOver), which nothing else holds and nothing will
// use after (a shallow move of its fields, not a proto.Merge, which would
// copy it a second time), or the shallow copy of a request its caller
// shares (see ShareRequest), whose parts both sides then read and neither
// changes.
func move(dst any, src proto.Message) error {
	d, ok := dst.(proto.Message)
	if !ok {
		return status.Errorf(codes.Internal, "in-process call: %T is not a protobuf message", dst)
	}
	dv, sv := reflect.ValueOf(d).Elem(), reflect.ValueOf(src).Elem()
	if dv.Type() != sv.Type() {
		return status.Errorf(codes.Internal, "in-process call: got %T, want %T", src, d)
	}
	dv.Set(sv)
	return nil
}

// chainedStreamHandler returns the handler that runs ics[i:] in turn,
// the first outermost as grpc-go chains a server's, then final.
func chainedStreamHandler(ics []grpc.StreamServerInterceptor, i int, info *grpc.StreamServerInfo, final grpc.StreamHandler) grpc.StreamHandler {
	if i == len(ics) {
		return final
	}
	next := chainedStreamHandler(ics, i+1, info, final)
	return func(srv any, ss grpc.ServerStream) error {
		return ics[i](srv, ss, info, next)
	}
}
