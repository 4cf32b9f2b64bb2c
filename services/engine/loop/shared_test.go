package loop_test

import (
	"context"
	"crypto/sha256"
	"slices"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// keeper is an LLM that keeps every request the loop sends, as the llm
// service in the same process reads it (shared, not copied), with the
// hash of its encoding when it was sent, and keeps reading each one in a
// goroutine of its own until stop is closed: under -race, the loop
// writing any part of a request it sent (a message of its history, a
// slot of a slice, a setting) is a race with those reads.
type keeper struct {
	inner loop.LLM
	stop  chan struct{}
	wg    sync.WaitGroup

	mu       sync.Mutex
	kept     []keptRequest
	unshared int
}

type keptRequest struct {
	req *penguinv1.StreamGenerateRequest
	sum [32]byte
}

func (k *keeper) StreamGenerate(ctx context.Context, req *penguinv1.StreamGenerateRequest, opts ...grpc.CallOption) (grpc.ServerStreamingClient[penguinv1.StreamGenerateResponse], error) {
	sum := encodingSum(req)
	k.mu.Lock()
	k.kept = append(k.kept, keptRequest{req, sum})
	if !slices.Contains(opts, grpcserver.ShareRequest()) {
		k.unshared++
	}
	k.mu.Unlock()
	k.wg.Go(func() {
		for {
			select {
			case <-k.stop:
				return
			case <-time.After(50 * time.Microsecond):
				encodingSum(req)
			}
		}
	})
	return k.inner.StreamGenerate(ctx, req, opts...)
}

// encodingSum is the SHA-256 of m's deterministic encoding.
func encodingSum(m proto.Message) [32]byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		panic(err)
	}
	return sha256.Sum256(b)
}

// TestRequestsUnchanged runs two tasks in one context through every way
// the loop builds a request (tool calls run while the stream goes on,
// a reconnect with its note, steering, a compaction rejected once then
// adopted, the fresh context after it, a second task on the history the
// first left) and checks that the loop asks for every request to be
// shared (grpcserver.ShareRequest) and never changes one it sent: each
// encodes to the same bytes at the end as when it was sent.
func TestRequestsUnchanged(t *testing.T) {
	r := newRig(t,
		fake.NewReply().Text("Two things.").ToolCall("c1", "t", `{"n":1}`).ToolCall("c2", "t", `{"n":2}`).Done(),
		fake.NewReply().PartialOnly("cut").Fail(timeout, "connection reset"),
		fake.NewReply().ToolCall("c3", "t", `{"n":3}`).Usage(1000).Outcome(&penguinv1.LLMOutcome{Status: completed}),
		fake.NewReply().ToolCall("c4", "t", `{}`).Done(),
		fake.NewReply().Text("[summary]we ran t three times[/summary]").Done(),
		fake.NewReply().Text("continuing").Done(),
		fake.NewReply().Text("second task").Done(),
	)
	withCompaction(r, 500, 0, penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE)
	r.env.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		if req.GetToolCall().GetToolCallId() == "c3" {
			r.host.steer("mind the tests")
		}
		return fake.Echo(req, s)
	}
	k := &keeper{inner: r.deps.LLM, stop: make(chan struct{})}
	r.deps.LLM = k
	for _, prompt := range []string{"go", "again"} {
		if res := r.run(context.Background(), prompt); res.Status != completed || res.Err != nil {
			t.Fatalf("task %q: result = %+v", prompt, res)
		}
	}
	close(k.stop)
	k.wg.Wait()
	if len(k.kept) != 7 {
		t.Fatalf("%d requests, want 7", len(k.kept))
	}
	if k.unshared > 0 {
		t.Errorf("%d of %d requests were not sent shared", k.unshared, len(k.kept))
	}
	for i, kr := range k.kept {
		if encodingSum(kr.req) != kr.sum {
			t.Errorf("request %d changed after it was sent: %v", i+1, kr.req)
		}
	}
}
