package describeimage_test

import (
	"context"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/enginetool"
	"github.com/penguin-agent/penguin/services/engine/enginetool/describeimage"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"google.golang.org/grpc"
)

var eyes = &penguinv1.ModelRef{Provider: "fake", ModelId: "eyes"}

// newTool serves llm over gRPC and returns describe_image on it, with an
// environment whose read_image answers with read.
func newTool(t *testing.T, llm *fake.LLM, read func(call *penguinv1.ToolCall) *penguinv1.OmniMessage) *describeimage.Tool {
	t.Helper()
	conn := fake.Dial(t, func(s *grpc.Server) { penguinv1.RegisterLLMServiceServer(s, llm) })
	return &describeimage.Tool{
		LLM:       penguinv1.NewLLMServiceClient(conn),
		Vision:    eyes,
		TimeoutMs: 5000,
		Environment: enginetool.Func(func(_ context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
			return read(call)
		}),
	}
}

func noRead(t *testing.T) func(*penguinv1.ToolCall) *penguinv1.OmniMessage {
	return func(*penguinv1.ToolCall) *penguinv1.OmniMessage {
		t.Error("the environment was asked to read an image")
		return nil
	}
}

func describe(tool *describeimage.Tool, ctx context.Context, args string) *penguinv1.ToolCallOutput {
	call := &penguinv1.ToolCall{ToolCallId: "c1", Name: "describe_image", Arguments: args}
	return tool.Execute(ctx, call, func(*penguinv1.OmniMessage) {}).GetToolCallOutput()
}

func TestDescribesAWorkspaceImage(t *testing.T) {
	llm := &fake.LLM{Generate: fake.Script(fake.NewReply().Text("a cat").Text("on a mat").Done())}
	var readCall *penguinv1.ToolCall
	tool := newTool(t, llm, func(call *penguinv1.ToolCall) *penguinv1.OmniMessage {
		readCall = call
		return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{
			ToolCallId: call.GetToolCallId(), Output: "[image]", Images: []string{"data:image/png;base64,AAAA"},
		}}}
	})
	out := describe(tool, t.Context(), `{"source":"pics/cat.png","prompt":"what animal?"}`)
	if out.GetOutput() != "a cat\non a mat" || out.GetStopReason() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED || out.GetToolCallId() != "c1" {
		t.Fatalf("output = %v", out)
	}
	if readCall.GetName() != "read_image" || readCall.GetArguments() != `{"source":"pics/cat.png"}` || readCall.GetToolCallId() != "c1-read" {
		t.Fatalf("read call = %v", readCall)
	}
	req := llm.Requests()[0]
	if req.GetModel().GetModelId() != "eyes" || len(req.GetTools()) != 0 || req.GetSystemPrompt() != "" || req.GetRequestTimeoutMs() != 5000 ||
		req.GetNewMessages()[0].GetText().GetText() != "what animal?" || req.GetNewMessages()[1].GetImageUrl().GetImageUrl() != "data:image/png;base64,AAAA" {
		t.Fatalf("vision request = %v", req)
	}
}

func TestAURLGoesAsItIsWithTheDefaultQuestion(t *testing.T) {
	llm := &fake.LLM{Generate: fake.Script(fake.NewReply().Text("a chart").Done())}
	tool := newTool(t, llm, noRead(t))
	if out := describe(tool, t.Context(), `{"source":"https://example.test/c.png"}`); out.GetOutput() != "a chart" {
		t.Fatalf("output = %v", out)
	}
	req := llm.Requests()[0]
	if req.GetNewMessages()[0].GetText().GetText() != describeimage.DefaultPrompt || req.GetNewMessages()[1].GetImageUrl().GetImageUrl() != "https://example.test/c.png" {
		t.Fatalf("vision request = %v", req.GetNewMessages())
	}
}

func TestFailuresBecomeOutputs(t *testing.T) {
	cases := []struct {
		name   string
		vision *penguinv1.ModelRef
		reply  *fake.Reply
		read   string // read_image's output; empty means it returns an image
		args   string
		want   string
	}{
		{name: "no vision model", args: `{"source":"a.png"}`, want: "set model.vision_model"},
		{name: "bad arguments", vision: eyes, args: `{"prompt":"x"}`, want: "the source is missing"},
		{name: "unreadable file", vision: eyes, args: `{"source":"a.png"}`, read: "no such file", want: "could not read the image: no such file"},
		{name: "model failed", vision: eyes, args: `{"source":"https://x.test/a.png"}`, reply: fake.NewReply().Fail(penguinv1.StopReason_STOP_REASON_AUTH, "bad key"), want: "the vision model failed (auth): bad key"},
		{name: "no answer", vision: eyes, args: `{"source":"https://x.test/a.png"}`, reply: fake.NewReply().Done(), want: "gave no answer"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			llm := &fake.LLM{}
			if c.reply != nil {
				llm.Generate = fake.Script(c.reply)
			}
			tool := newTool(t, llm, func(call *penguinv1.ToolCall) *penguinv1.OmniMessage {
				if c.read != "" {
					return omni.ToolCallOutput(call.GetToolCallId(), c.read, penguinv1.StopReason_STOP_REASON_FAILED)
				}
				return &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{Images: []string{"data:image/png;base64,AAAA"}}}}
			})
			tool.Vision = c.vision
			out := describe(tool, t.Context(), c.args)
			if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_FAILED || !strings.Contains(out.GetOutput(), c.want) {
				t.Fatalf("output = %v, want a failure saying %q", out, c.want)
			}
		})
	}
}

func TestAbortedWhileTheModelAnswers(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	llm := &fake.LLM{Generate: fake.Script(fake.NewReply().PartialOnly("a c").Hook(func(rctx context.Context) error {
		cancel()
		<-rctx.Done()
		return rctx.Err()
	}))}
	tool := newTool(t, llm, noRead(t))
	out := describe(tool, ctx, `{"source":"https://x.test/a.png"}`)
	if out.GetStopReason() != penguinv1.StopReason_STOP_REASON_ABORTED || out.GetOutput() != "Tool call aborted." {
		t.Fatalf("output = %v", out)
	}
}
