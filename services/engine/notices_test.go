package engine_test

import (
	"strings"
	"sync/atomic"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"google.golang.org/grpc"
)

func TestBackgroundCommandReportStartsATask(t *testing.T) {
	e := newEnv(t)
	fire := newGate()
	var fired, sent atomic.Bool
	e.envSvc.Processes = func() []*penguinv1.ProcessInfo {
		if fired.Load() {
			return nil
		}
		return []*penguinv1.ProcessInfo{{ProcessId: "p1", Command: "make", State: penguinv1.ProcessState_PROCESS_STATE_RUNNING, Background: true}}
	}
	e.envSvc.Watch = func(req *penguinv1.WatchEnvironmentRequest, s grpc.ServerStreamingServer[penguinv1.WatchEnvironmentResponse]) error {
		if err := fire.wait(s.Context()); err != nil {
			return err
		}
		fired.Store(true)
		// Like the environment service, a notice goes to one watcher.
		if !sent.CompareAndSwap(false, true) {
			<-s.Context().Done()
			return nil
		}
		if err := s.Send(&penguinv1.WatchEnvironmentResponse{Notice: &penguinv1.WatchEnvironmentResponse_BackgroundDone{BackgroundDone: &penguinv1.BackgroundDone{
			ProcessId: "p1", Command: "make", ExitCode: 0, Output: "build ok",
		}}}); err != nil {
			return err
		}
		<-s.Context().Done()
		return nil
	}
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("The build runs in the background.").Done(),
		fake.NewReply().Text("The build finished fine.").Done(),
	)
	id := e.create(allowAll)
	end(t, e.run(id, "build it in the background"))
	// The session stays watched while the command runs; its report then
	// starts a task of its own.
	if e.mgr.Loaded() != 1 {
		t.Fatalf("%d runtimes loaded while a background command runs, want 1", e.mgr.Loaded())
	}
	fire.open()
	eventually.True(t, "the report's task", func() bool { return len(e.llm.Requests()) == 2 })
	req := e.llm.Requests()[1]
	nm := req.GetNewMessages()
	if len(nm) != 1 || nm[0].GetText().GetSender() != penguinv1.Sender_SENDER_HARNESS ||
		!strings.Contains(nm[0].GetText().GetText(), "[background_task_done]") || !strings.Contains(nm[0].GetText().GetText(), "build ok") {
		t.Fatalf("report input = %v", nm)
	}
	eventually.True(t, "the session to settle", func() bool { return e.mgr.Loaded() == 0 })
	if !enginetest.HasText(enginetest.Messages(history(t, e, id)), "The build finished fine.") {
		t.Fatal("the report's task is not in the log")
	}
}

func TestDescribeImageForATextOnlyModel(t *testing.T) {
	e := newEnv(t)
	writeConfig(t, e.agentDir, testConfig+`model:
  thinking_level: medium
  max_tokens: 32000
  request_timeout_ms: 120000
  vision_model: {provider: fake, model_id: eyes}
`)
	e.llm.Models = []*penguinv1.ModelInfo{{Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, ContextWindow: 32000, Vision: false}}
	e.envSvc.Tools = append(e.envSvc.Tools, fake.Tool("read_image", penguinv1.Permission_PERMISSION_R))
	e.envSvc.Execute = func(req *penguinv1.ExecuteToolRequest, s grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
		tc := req.GetToolCall()
		if tc.GetName() == "read_image" {
			out := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{
				Role: penguinv1.Role_ROLE_USER, ToolCallId: tc.GetToolCallId(), Output: "[image]", Images: []string{"data:image/png;base64,iVBORw0KGgo="},
			}}}
			return s.Send(&penguinv1.ExecuteToolResponse{Message: out})
		}
		return fake.Echo(req, s)
	}
	main := fake.Script(
		fake.NewReply().ToolCall("c1", "describe_image", `{"source":"cat.png","prompt":"what animal?"}`).Done(),
		fake.NewReply().Text("It is a cat.").Done(),
	)
	var visionReq *penguinv1.StreamGenerateRequest
	e.llm.Generate = func(req *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if req.GetModel().GetModelId() == "eyes" {
			visionReq = req
			return fake.NewReply().Text("a cat on a mat").Done().Send(s)
		}
		return main(req, s)
	}
	id := e.create(allowAll)
	evs := e.run(id, "what is in cat.png?")
	end(t, evs)
	var out string
	for _, m := range enginetest.Messages(evs) {
		if o := m.GetToolCallOutput(); o != nil {
			out = o.GetOutput()
		}
	}
	if out != "a cat on a mat" {
		t.Fatalf("describe_image output = %q", out)
	}
	if visionReq == nil || len(visionReq.GetTools()) != 0 || visionReq.GetSystemPrompt() != "" ||
		visionReq.GetNewMessages()[0].GetText().GetText() != "what animal?" ||
		visionReq.GetNewMessages()[1].GetImageUrl().GetImageUrl() != "data:image/png;base64,iVBORw0KGgo=" {
		t.Fatalf("vision request = %v", visionReq)
	}
	// A text-only model is offered describe_image, not read_image.
	var names []string
	for _, tool := range e.llm.Requests()[0].GetTools() {
		names = append(names, tool.GetName())
	}
	joined := strings.Join(names, ",")
	if !strings.Contains(joined, "describe_image") || strings.Contains(joined, "read_image") {
		t.Fatalf("tools offered = %v", names)
	}
}
