package engine_test

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/scratchpad"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// testPNG is the start of a PNG: enough for the type check of attached
// images, and bytes the scratchpad copy must hold exactly.
var testPNG = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00penguin")

func pngURL(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }

// attachedRef finds the scratchpad path a message names for an attached
// image, checks the file holds want, and returns the path.
func attachedRef(t *testing.T, e *env, id string, msgs []*penguinv1.OmniMessage, want []byte) string {
	t.Helper()
	re := regexp.MustCompile(`\[attached image 1: (scratchpad/image-[a-z0-9]+-1\.png);`)
	for _, m := range msgs {
		if sub := re.FindStringSubmatch(m.GetText().GetText()); sub != nil {
			name, _ := scratchpad.Name(sub[1])
			got, err := os.ReadFile(filepath.Join(e.agentDir, scratchpad.Dir, id, name))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("the scratchpad's %s = %q, %v; want the image's bytes", name, got, err)
			}
			return sub[1]
		}
	}
	t.Fatalf("no message names an attached image in the scratchpad: %v", msgs)
	return ""
}

// An image for a model without vision is saved to the session's
// scratchpad and named by path; describe_image can then look at it.
func TestImageForATextOnlyModelGoesToTheScratchpad(t *testing.T) {
	e := newEnv(t)
	writeConfig(t, e.agentDir, testConfig+`model:
  thinking_level: medium
  max_tokens: 32000
  request_timeout_ms: 120000
  vision_model: {provider: fake, model_id: eyes}
`)
	e.llm.Models = []*penguinv1.ModelInfo{{Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, ContextWindow: 32000, Vision: false}}
	var visionReq *penguinv1.StreamGenerateRequest
	var main func(*penguinv1.StreamGenerateRequest, grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error
	e.llm.Generate = func(req *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if req.GetModel().GetModelId() == "eyes" {
			visionReq = req
			return fake.NewReply().Text("a penguin").Done().Send(s)
		}
		return main(req, s)
	}
	id := e.create(allowAll)

	// The path is only known once the first request names it: the first
	// reply calls describe_image on whatever path that is.
	var ref string
	main = func(req *penguinv1.StreamGenerateRequest, s grpc.ServerStreamingServer[penguinv1.StreamGenerateResponse]) error {
		if ref == "" {
			ref = attachedRef(t, e, id, req.GetNewMessages(), testPNG)
			return fake.NewReply().ToolCall("c1", "describe_image", fmt.Sprintf(`{"source":%q}`, ref)).Done().Send(s)
		}
		return fake.NewReply().Text("It shows a penguin.").Done().Send(s)
	}
	evs := e.run(id, "what is this?", func(r *penguinv1.RunRequest) { r.Images = []string{pngURL(testPNG)} })
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("status %v %s", st.GetStatus(), st.GetMessage())
	}
	for _, m := range e.llm.Requests()[0].GetNewMessages() {
		if m.GetImageUrl() != nil {
			t.Fatalf("a text-only model got the image itself: %v", m)
		}
	}
	if visionReq == nil || visionReq.GetNewMessages()[1].GetImageUrl().GetImageUrl() != pngURL(testPNG) {
		t.Fatalf("describe_image on %s sent the vision model %v", ref, visionReq)
	}
}

// A scratchpad that cannot take the image refuses the message, naming the
// image, and records nothing of it; images the API refuses never reach
// the scratchpad. (An image over the size limit is refused by the same
// check, attach.CheckImages, tested in internal/attach; this harness's
// server takes messages of at most 4 MiB, less than an oversized image.)
func TestImageForATextOnlyModelRefused(t *testing.T) {
	e := newEnv(t)
	e.llm.Models = []*penguinv1.ModelInfo{{Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, ContextWindow: 32000, Vision: false}}
	e.llm.Generate = fake.Script(fake.NewReply().Text("ok").Done())
	id := e.create(allowAll)

	for name, img := range map[string]string{
		"not an image": "data:image/png;base64," + base64.StdEncoding.EncodeToString([]byte("plain text")),
		"bad base64":   "data:image/png;base64,!!!",
	} {
		stream, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: "look", Images: []string{img}})
		if err == nil {
			_, err = enginetest.Collect(stream)
		}
		if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "image 1") {
			t.Fatalf("%s: Run = %v, want INVALID_ARGUMENT naming image 1", name, err)
		}
	}
	pad := filepath.Join(e.agentDir, scratchpad.Dir, id)
	if _, err := os.Stat(pad); !os.IsNotExist(err) {
		t.Fatalf("a refused image reached the scratchpad: %v", err)
	}

	// A full scratchpad: the message is refused whole.
	if err := os.MkdirAll(pad, 0o700); err != nil {
		t.Fatal(err)
	}
	for i := range scratchpad.MaxFiles {
		if err := os.WriteFile(filepath.Join(pad, fmt.Sprintf("f%d.txt", i)), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	stream, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: "look at this", Images: []string{pngURL(testPNG)}})
	if err == nil {
		_, err = enginetest.Collect(stream)
	}
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "image 1") || !strings.Contains(err.Error(), "already holds 64 files") {
		t.Fatalf("Run with a full scratchpad = %v", err)
	}
	if enginetest.HasText(enginetest.Messages(history(t, e, id)), "look at this") {
		t.Fatal("the refused message was recorded")
	}
	if n := len(e.llm.Requests()); n != 0 {
		t.Fatalf("%d model requests for refused messages", n)
	}
}

// A steering message carries images too: a model with vision gets them
// with the steering text, a text-only one their scratchpad paths.
func TestSteerWithImages(t *testing.T) {
	for _, vision := range []bool{true, false} {
		t.Run(fmt.Sprintf("vision=%v", vision), func(t *testing.T) {
			e := newEnv(t)
			e.llm.Models = []*penguinv1.ModelInfo{{Model: &penguinv1.ModelRef{Provider: "fake", ModelId: "m1"}, ContextWindow: 32000, Vision: vision}}
			e.llm.Generate = fake.Script(
				fake.NewReply().ToolCall("c1", "exec_command", `{}`).Done(),
				fake.NewReply().Text("seen").Done(),
			)
			id := e.create(allowAll)
			e.steerDuringATool(t, id, &penguinv1.SteerRequest{SessionId: id, Text: "like this one", Images: []string{pngURL(testPNG)}})
			nm := e.llm.Requests()[1].GetNewMessages()
			if len(nm) != 3 || nm[1].GetText().GetText() != "[user_steering]\nlike this one\n[/user_steering]" {
				t.Fatalf("second request input = %v", nm)
			}
			if vision {
				if nm[2].GetImageUrl().GetImageUrl() != pngURL(testPNG) {
					t.Fatalf("the image did not reach the model: %v", nm[2])
				}
			} else {
				attachedRef(t, e, id, nm[2:], testPNG)
			}
			// An image the API refuses: the whole steering message is refused.
			_, err := e.client.Steer(e.ctx(), &penguinv1.SteerRequest{SessionId: id, Text: "x", Images: []string{"data:image/png;base64,!!!"}})
			if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "image 1") {
				t.Fatalf("Steer with a bad image = %v", err)
			}
		})
	}
}
