package grpcserver_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestEnumCheckSkipsOnlySharedRequests sends a request whose history
// ends with a stop reason no contract declares: the enum check refuses
// it on every route but one, the in-process channel's own stream (tracing
// off) of a request its caller shares (grpcserver.ShareRequest) with a
// handler that only reads it (grpcserver.RequestReader), which the check
// lets through unwalked (see internal/enumcheck). Over TCP the option
// does nothing, so a caller outside the process cannot use it to pass.
func TestEnumCheckSkipsOnlySharedRequests(t *testing.T) {
	t.Parallel()
	forTracing(t, func(t *testing.T, opts grpcserver.Options) {
		traced := opts.TracerProvider != nil
		readers, r := startReaders(t, opts)
		history := benchHistory(40)
		history = append(history, omni.ToolCallOutput("call-x", "out", 99))
		for _, tr := range transports {
			for name, rd := range readers {
				for _, share := range []bool{false, true} {
					what := fmt.Sprintf("%s via %s (traced %v, shared %v)", name, tr, traced, share)
					req := &penguinv1.StreamGenerateRequest{History: history, NewMessages: []*penguinv1.OmniMessage{omni.UserText("and now?")}}
					err := readOnce(t, r.via(tr), name, share, req)
					if rd.only && share && tr == "in-process" && !traced {
						if err != nil {
							t.Errorf("%s: %v, want the shared request through", what, err)
						} else {
							<-rd.got
						}
						continue
					}
					if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "history[40].tool_call_output.stop_reason: 99 is not a value of penguin.v1.StopReason") {
						t.Errorf("%s: %v, want INVALID_ARGUMENT naming history[40]'s stop reason", what, err)
					}
				}
			}
		}
	})
}

// TestSharedTurnCostIsFlat times a model turn through the in-process
// channel, its request shared, at 50 and 200 history messages: the two
// cost about the same, since neither the copy nor the enum check walks
// the history. (The walk alone made the turn at 200 messages more than
// twice as slow as at 50.) The least time of several rounds, taken in
// turn, keeps a loaded machine's pauses out of the comparison.
func TestSharedTurnCostIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("times turns")
	}
	r := start(t, grpcserver.Options{}, func(s *grpcserver.Server) {
		penguinv1.RegisterLLMServiceServer(s, readingLLM{&fakeLLM{streamGenerate: func(s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
			return s.Send(&penguinv1.StreamGenerateResponse{Frame: &penguinv1.StreamGenerateResponse_Outcome{Outcome: &penguinv1.LLMOutcome{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}}})
		}}})
	})
	client := penguinv1.NewLLMServiceClient(r.srv.InProcess())
	ctx := testkit.Context(t, time.Minute)
	turn := func(req *penguinv1.StreamGenerateRequest) {
		stream, err := client.StreamGenerate(ctx, req, grpcserver.ShareRequest())
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); errors.Is(err, io.EOF) {
				return
			} else if err != nil {
				t.Fatal(err)
			}
		}
	}
	sizes := []int{50, 200}
	least := make([]time.Duration, len(sizes))
	for range 15 {
		for i, n := range sizes {
			req := &penguinv1.StreamGenerateRequest{Model: &penguinv1.ModelRef{Provider: "p", ModelId: "m"}, History: benchHistory(n),
				NewMessages: []*penguinv1.OmniMessage{omni.UserText("and now?")}}
			const turns = 100
			began := time.Now()
			for range turns {
				turn(req)
			}
			if d := time.Since(began) / turns; least[i] == 0 || d < least[i] {
				least[i] = d
			}
		}
	}
	t.Logf("a turn: %v at 50 history messages, %v at 200", least[0], least[1])
	if least[1] > least[0]*3/2 {
		t.Errorf("a turn at 200 history messages takes %v, at 50 %v: more than half as long again", least[1], least[0])
	}
}
