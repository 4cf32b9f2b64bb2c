package llm_test

import (
	"context"
	"crypto/sha256"
	"sync"
	"testing"

	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// TestRequestSharedInProcess calls the service through the in-process
// channel with requests shared rather than copied (grpcserver.ShareRequest,
// as the engine's loop sends them), each carrying every kind of message a
// history holds (thinking with its fidelity, text, tool calls and their
// outputs with images, inline data) and tools, for the OpenAI and the
// Anthropic adapter, twice, the second request's history the first's
// grown in place as the loop grows it. While each call runs, the caller
// keeps encoding its request, and after it the request must be what it
// was, byte for byte: under -race, the service writing any part of it
// (prepare filling in a default, a middleware, an adapter trimming the
// history or marking a message) is a race with those reads; without
// -race, the comparison catches it. A middleware checks that the service
// got the caller's messages themselves, so that the test fails if the
// request was copied after all and proved nothing.
func TestRequestSharedInProcess(t *testing.T) {
	turn := emulator.Turn{Text: "Done.", Usage: emulator.Usage{Input: 50, Output: 3}}
	for _, route := range []struct{ provider, model string }{{"emu-openai", "gpt-big"}, {"emu-anthropic", "claude-test"}} {
		t.Run(route.provider, func(t *testing.T) {
			var seen sharedSeen
			e := start(t, emulator.Script{Turns: []emulator.Turn{turn, turn}}, options{inProcess: true, extra: []stream.Middleware{seen.middleware}})
			history := sharedHistory()
			for call := range 2 {
				req := genRequest(route.provider, route.model, omni.UserText("and now?"))
				req.History = history
				req.Tools = []*penguinv1.ToolDefinition{{Name: "read_file", Description: "Reads a file.", Parameters: `{"type":"object","properties":{"path":{"type":"string"}}}`}}
				req.Temperature = proto.Float32(0.5)
				before := proto.Clone(req)
				sum := requestSum(t, req)

				stop := make(chan struct{})
				var reads sync.WaitGroup
				reads.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
							requestSum(t, req)
						}
					}
				})
				r := func() llmResult {
					defer func() { close(stop); reads.Wait() }()
					res := e.call(t, req, grpcserver.ShareRequest())
					return llmResult{status: res.Outcome.GetStatus()}
				}()
				if r.status != penguinv1.StopReason_STOP_REASON_COMPLETED {
					t.Fatalf("call %d: outcome %v", call, r.status)
				}
				if got := requestSum(t, req); got != sum || !proto.Equal(req, before) {
					t.Fatalf("call %d: the service changed the request it shared:\nbefore %v\nafter  %v", call, before, req)
				}
				if first := seen.first(); first != history[0] {
					t.Fatalf("call %d: the service got a copy of the request's messages, not the caller's own", call)
				}
				// The loop's next request: the history with this turn's
				// input and answer appended, in the same array when it
				// has room.
				history = append(history, req.GetNewMessages()[0], omni.AssistantText("Done."))
			}
		})
	}
}

// llmResult is what TestRequestSharedInProcess keeps of a call.
type llmResult struct{ status penguinv1.StopReason }

// sharedHistory is a history with every kind of message, in a slice with
// room to grow in place.
func sharedHistory() []*penguinv1.OmniMessage {
	const png = "data:image/png;base64,iVBORw0KGgo="
	h := make([]*penguinv1.OmniMessage, 0, 16)
	return append(h,
		omni.UserText("read a.txt"),
		&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_InlineData{InlineData: &penguinv1.InlineData{MimeType: "text/plain", Data: "bm90ZXM="}}},
		omni.ImageURL(png),
		omni.Thinking("Reading it.", translate.Fidelity("signature", "sig-1")),
		omni.AssistantText("I will read it."),
		omni.ToolCall("call-1", "read_file", `{"path":"a.txt"}`),
		omni.ToolCallOutput("call-1", "contents", penguinv1.StopReason_STOP_REASON_COMPLETED, png),
		omni.AssistantText("It says contents."),
	)
}

// requestSum is the SHA-256 of the request's deterministic encoding.
func requestSum(t *testing.T, req *penguinv1.StreamGenerateRequest) [32]byte {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		t.Error(err)
	}
	return sha256.Sum256(b)
}

// sharedSeen is a middleware that keeps the first message of the last
// request it saw.
type sharedSeen struct {
	mu  sync.Mutex
	msg *penguinv1.OmniMessage
}

func (s *sharedSeen) middleware(next stream.Streamer) stream.Streamer {
	return stream.StreamerFunc(func(ctx context.Context, req *stream.Request, emit stream.Emit) *penguinv1.LLMOutcome {
		s.mu.Lock()
		s.msg = req.Messages[0]
		s.mu.Unlock()
		return next.Stream(ctx, req, emit)
	})
}

func (s *sharedSeen) first() *penguinv1.OmniMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.msg
}
