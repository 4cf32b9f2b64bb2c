// Package describeimage is the describe_image engine tool: it lets a
// text-only model see an image through the agent's vision model, with a
// one-shot request that carries the image and a question, no tools and no
// system prompt, whose text answer is the tool's output.
//
// It is an engine tool because it calls the model gateway; the image
// itself, when it is a workspace file, is read through the environment's
// read_image tool.
package describeimage

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/enginetool"
	"github.com/penguin-agent/penguin/services/engine/loop"
	"github.com/penguin-agent/penguin/services/engine/scratchpad"
	"google.golang.org/grpc/status"
)

// DefaultPrompt is asked when the model gives no question.
const DefaultPrompt = "Describe this image in detail: its content, any text in it (transcribed exactly), layout, colours and anything notable."

// Tool is describe_image for one session.
type Tool struct {
	// LLM is the model gateway.
	LLM loop.LLM
	// Vision is the agent's vision model; nil makes every call fail with
	// the setting to add.
	Vision *penguinv1.ModelRef
	// TimeoutMs bounds the vision request; zero leaves it to the gateway.
	TimeoutMs int64
	// Project is the session's project, whose provider routes the vision
	// model may be on.
	Project string
	// Environment runs the session's environment tools, for read_image.
	Environment enginetool.Tool
	// Scratchpad is the session's scratchpad, where the images attached
	// for a text-only model are kept (a source scratchpad/<name>).
	Scratchpad *scratchpad.Pad
}

// Execute implements enginetool.Tool.
func (d *Tool) Execute(ctx context.Context, call *penguinv1.ToolCall, _ func(*penguinv1.OmniMessage)) *penguinv1.OmniMessage {
	fail := func(msg string) *penguinv1.OmniMessage { return enginetool.Failed(call, "%s", msg) }
	if d.Vision == nil {
		return fail("describe_image needs a vision model, and this agent has none: set model.vision_model (provider and model_id) in its system_config.yaml.")
	}
	var args struct {
		Source string `json:"source"`
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal([]byte(call.GetArguments()), &args); err != nil || strings.TrimSpace(args.Source) == "" {
		return fail(`describe_image takes {"source": "<http(s) URL, workspace path or scratchpad/<name>>", "prompt": "<question>"}; the source is missing or the arguments are not valid JSON.`)
	}
	url, failed := d.imageURL(ctx, call, args.Source)
	if failed != "" {
		return fail(failed)
	}
	prompt := args.Prompt
	if strings.TrimSpace(prompt) == "" {
		prompt = DefaultPrompt
	}
	return d.ask(ctx, call, prompt, url)
}

// imageURL returns the URL the vision model gets: a URL as given, a
// scratchpad image, or a workspace file read by the environment as a data
// URL. failed says why there is none.
func (d *Tool) imageURL(ctx context.Context, call *penguinv1.ToolCall, source string) (url, failed string) {
	if strings.HasPrefix(source, "http://") || strings.HasPrefix(source, "https://") || strings.HasPrefix(source, "data:") {
		return source, ""
	}
	if name, ok := scratchpad.Name(source); ok && d.Scratchpad != nil {
		_, img, err := d.Scratchpad.Read(name)
		switch {
		case err != nil:
			return "", "describe_image could not read the image: " + strings.TrimPrefix(err.Error(), scratchpad.ErrRefused.Error()+": ")
		case img == "":
			return "", "describe_image could not read the image: " + source + " is not an image"
		}
		return img, ""
	}
	readArgs, _ := json.Marshal(map[string]string{"source": source})
	out := d.Environment.Execute(ctx, &penguinv1.ToolCall{
		Role: penguinv1.Role_ROLE_ASSISTANT, Name: agentconfig.ToolReadImage, Arguments: string(readArgs), ToolCallId: call.GetToolCallId() + "-read",
	}, func(*penguinv1.OmniMessage) {})
	o := out.GetToolCallOutput()
	if len(o.GetImages()) == 0 {
		return "", "describe_image could not read the image: " + o.GetOutput()
	}
	return o.GetImages()[0], ""
}

// ask sends the one-shot request and collects its text answer.
func (d *Tool) ask(ctx context.Context, call *penguinv1.ToolCall, prompt, url string) *penguinv1.OmniMessage {
	fail := func(msg string) *penguinv1.OmniMessage { return enginetool.Failed(call, "%s", msg) }
	req := &penguinv1.StreamGenerateRequest{
		Model:       d.Vision,
		Project:     d.Project,
		NewMessages: []*penguinv1.OmniMessage{omni.UserText(prompt), omni.ImageURL(url)},
	}
	if d.TimeoutMs != 0 {
		t := d.TimeoutMs
		req.RequestTimeoutMs = &t
	}
	stream, err := d.LLM.StreamGenerate(ctx, req)
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
				return enginetool.Aborted(call)
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
			return enginetool.Output(call, text.String())
		}
		if t := frame.GetMessage().GetText(); t != nil {
			if text.Len() > 0 {
				text.WriteString("\n")
			}
			text.WriteString(t.GetText())
		}
	}
}
