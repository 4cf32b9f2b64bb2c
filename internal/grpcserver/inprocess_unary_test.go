package grpcserver_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/testkit"
)

// goroutineID is the number of the goroutine that calls it, from the
// first line of its stack ("goroutine 42 [running]:").
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

type callerKey struct{}

// TestInProcessUnaryRunsOnTheCallersGoroutine checks that a unary call
// through the in-process channel, with tracing off, runs its handler on
// the caller's goroutine (no goroutine started, none whose stack must
// grow), and that the handler still sees what it would over the network:
// the in-process peer, none of the caller's context values, the caller's
// deadline.
func TestInProcessUnaryRunsOnTheCallersGoroutine(t *testing.T) {
	t.Parallel()
	type seen struct {
		goroutine string
		value     any
		peer      string
		deadline  time.Time
	}
	var got seen
	f := &fakeLLM{listProviders: func(ctx context.Context) (*penguinv1.ListProvidersResponse, error) {
		got.goroutine = goroutineID()
		got.value = ctx.Value(callerKey{})
		if p, ok := peer.FromContext(ctx); ok {
			got.peer = p.Addr.Network()
		}
		got.deadline, _ = ctx.Deadline()
		return &penguinv1.ListProvidersResponse{}, nil
	}}
	r := start(t, grpcserver.Options{}, registerLLM(f))
	ctx := testkit.Context(t, 30*time.Second)
	deadline, _ := ctx.Deadline()
	ctx = context.WithValue(ctx, callerKey{}, "the caller's")
	if _, err := penguinv1.NewLLMServiceClient(r.via("in-process")).ListProviders(ctx, &penguinv1.ListProvidersRequest{}); err != nil {
		t.Fatal(err)
	}
	want := seen{goroutine: goroutineID(), peer: "inproc", deadline: deadline}
	if got != want {
		t.Errorf("the handler saw %+v, want %+v", got, want)
	}
}

// TestInProcessUnaryEnds checks how an in-process unary call whose handler
// waits for its context ends: at the caller's deadline, as
// DeadlineExceeded on both sides; when the caller cancels, as Canceled; and when the
// server stops hard, as Canceled, for a caller whose context never ends.
func TestInProcessUnaryEnds(t *testing.T) {
	t.Parallel()
	forTracing(t, testInProcessUnaryEnds)
}

func testInProcessUnaryEnds(t *testing.T, opts grpcserver.Options) {
	ctx := testkit.Context(t, 30*time.Second)
	entered := make(chan struct{}, 1)
	ended := make(chan error, 3)
	f := &fakeLLM{listProviders: func(ctx context.Context) (*penguinv1.ListProvidersResponse, error) {
		entered <- struct{}{}
		<-ctx.Done() // ignores the graceful stop; only a hard stop ends it
		ended <- ctx.Err()
		return nil, ctx.Err()
	}}
	opts.ShutdownTimeout = 200 * time.Millisecond
	r := start(t, opts, registerLLM(f))
	client := penguinv1.NewLLMServiceClient(r.via("in-process"))

	dctx, stop := context.WithTimeout(ctx, 50*time.Millisecond)
	defer stop()
	if _, err := client.ListProviders(dctx, &penguinv1.ListProvidersRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("past the caller's deadline: %v, want DeadlineExceeded", err)
	}
	<-entered
	if err := <-ended; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the handler's context ended with %v past the caller's deadline, want DeadlineExceeded", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	go func() {
		<-entered
		cancel()
	}()
	if _, err := client.ListProviders(cctx, &penguinv1.ListProvidersRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled by the caller: %v, want Canceled", err)
	}

	stopped := make(chan error, 1)
	go func() {
		<-entered
		stopped <- r.stop(t)
	}()
	if _, err := client.ListProviders(context.Background(), &penguinv1.ListProvidersRequest{}); status.Code(err) != codes.Canceled {
		t.Errorf("stopped hard: %v, want Canceled", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// TestInProcessStreamRefusedBeforeItsRequest checks that a
// server-streaming call refused by an interceptor (here auth) before its
// caller sent the request ends with the refusal, not with a clean end:
// the handler's goroutine has ended by the time the request is sent,
// which the caller must not see as io.EOF. The request is sent once the
// refusal is surely done, many times, since the old code returned io.EOF
// at random then (a select between the ended call and room for the
// request).
func TestInProcessStreamRefusedBeforeItsRequest(t *testing.T) {
	t.Parallel()
	r := start(t, grpcserver.Options{AuthToken: "s3cret"}, registerLLM(&fakeLLM{}))
	ctx := testkit.Context(t, 30*time.Second)
	desc := &penguinv1.LLMService_ServiceDesc.Streams[0]
	for i := range 20 {
		cs, err := r.via("in-process").NewStream(ctx, desc, "/penguin.v1.LLMService/"+desc.StreamName)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // the refusal ends the handler's goroutine meanwhile
		err = cs.SendMsg(&penguinv1.StreamGenerateRequest{})
		if err == nil {
			err = cs.CloseSend()
		}
		if err == nil {
			err = cs.RecvMsg(new(penguinv1.StreamGenerateResponse))
		}
		if status.Code(err) != codes.Unauthenticated {
			t.Fatalf("call %d: %v, want Unauthenticated", i, err)
		}
	}
}
