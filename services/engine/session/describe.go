package session

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"google.golang.org/grpc/status"
)

// defaultDescribePrompt is asked when the model gives no question.
const defaultDescribePrompt = "Describe this image in detail: its content, any text in it (transcribed exactly), layout, colours and anything notable."

// describeImage lets a text-only model see an image through the agent's
// vision model: a one-shot request with the image and the question, no
// tools and no system prompt, whose text answer is the tool's output.
type describeImage struct {
	llm       loop.LLM
	ts        *toolset
	vision    *penguinv1.ModelRef
	timeoutMs int64
}

func (d *describeImage) Execute(ctx context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	id := call.GetToolCallId()
	fail := func(msg string) *penguinv1.OmniMessage {
		return omni.ToolCallOutput(id, msg, penguinv1.StopReason_STOP_REASON_FAILED)
	}
	if d.vision == nil {
		return fail("describe_image needs a vision model, and this agent has none: set model.vision_model (provider and model_id) in its system_config.yaml.")
	}
	var args struct {
		Source string `json:"source"`
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal([]byte(call.GetArguments()), &args); err != nil || strings.TrimSpace(args.Source) == "" {
		return fail(`describe_image takes {"source": "<http(s) URL or workspace path>", "prompt": "<question>"}; the source is missing or the arguments are not valid JSON.`)
	}
	url := args.Source
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "data:") {
		// A workspace file: the environment reads it as an image.
		readArgs, _ := json.Marshal(map[string]string{"source": args.Source})
		out := d.ts.exec.Execute(ctx, &penguinv1.ToolCall{Role: penguinv1.Role_ROLE_ASSISTANT, Name: agentstate.ToolReadImage, Arguments: string(readArgs), ToolCallId: id + "-read"}, func(*penguinv1.OmniMessage) {})
		o := out.GetToolCallOutput()
		if len(o.GetImages()) == 0 {
			return fail("describe_image could not read the image: " + o.GetOutput())
		}
		url = o.GetImages()[0]
	}
	prompt := args.Prompt
	if strings.TrimSpace(prompt) == "" {
		prompt = defaultDescribePrompt
	}
	req := &penguinv1.StreamGenerateRequest{
		Model:       d.vision,
		NewMessages: []*penguinv1.OmniMessage{omni.UserText(prompt), omni.ImageURL(url)},
	}
	if d.timeoutMs != 0 {
		t := d.timeoutMs
		req.RequestTimeoutMs = &t
	}
	stream, err := d.llm.StreamGenerate(ctx, req)
	if err != nil {
		return fail("the vision model could not be reached: " + status.Convert(err).Message())
	}
	var text strings.Builder
	for {
		frame, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fail("the vision model's answer ended without an outcome")
		}
		if err != nil {
			if ctx.Err() != nil {
				return omni.ToolCallOutput(id, "Tool call aborted.", penguinv1.StopReason_STOP_REASON_ABORTED)
			}
			return fail("the vision model failed: " + status.Convert(err).Message())
		}
		if o := frame.GetOutcome(); o != nil {
			if o.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
				return fail("the vision model failed (" + enumword.Word(o.GetStatus()) + "): " + o.GetMessage())
			}
			if text.Len() == 0 {
				return fail("the vision model gave no answer")
			}
			return omni.ToolCallOutput(id, text.String(), penguinv1.StopReason_STOP_REASON_UNSPECIFIED)
		}
		if t := frame.GetMessage().GetText(); t != nil {
			if text.Len() > 0 {
				text.WriteString("\n")
			}
			text.WriteString(t.GetText())
		}
	}
}
