package environment_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/environment"
)

// sentFrames is the environment service, recording each frame that
// ExecuteTool sends (the in-process channel moves a response's fields
// into the caller's: its message is the frame).
type sentFrames struct {
	*environment.Service
	mu   sync.Mutex
	sent map[*penguinv1.OmniMessage]bool
}

func (s *sentFrames) ExecuteTool(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
	return s.Service.ExecuteTool(req, recordingStream{stream, s})
}

type recordingStream struct {
	grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]
	s *sentFrames
}

func (r recordingStream) Send(m *penguinv1.ExecuteToolResponse) error {
	r.s.mu.Lock()
	r.s.sent[m.GetMessage()] = true
	r.s.mu.Unlock()
	return r.ServerStreamingServer.Send(m)
}

// TestToolFramesHandedOverInProcess calls ExecuteTool through the server's
// in-process channel and checks that the caller receives the frames the
// service sent, not copies of them (grpcserver.HandOver), and that a
// caller that changes every frame it received, as one that owns them
// may, changes nothing of what the service says next (under -race: the
// service reads no frame it sent).
func TestToolFramesHandedOverInProcess(t *testing.T) {
	h := start(t, environment.Options{})
	svc := &sentFrames{Service: h.svc, sent: map[*penguinv1.OmniMessage]bool{}}
	client := inProcess(t, svc)
	env := h.create(&penguinv1.CreateEnvironmentRequest{})
	if err := os.WriteFile(filepath.Join(env.GetWorkspace(), "a.txt"), []byte("one\ntwo\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var outputs []string
	for i := range 2 {
		call := &penguinv1.ToolCall{Name: "read_file", Arguments: `{"file_path":"a.txt"}`, ToolCallId: nextCallID()}
		stream, err := client.ExecuteTool(t.Context(), &penguinv1.ExecuteToolRequest{EnvironmentId: env.GetEnvironmentId(), ToolCall: call})
		if err != nil {
			t.Fatal(err)
		}
		var frames []*penguinv1.OmniMessage
		for {
			resp, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			svc.mu.Lock()
			handed := svc.sent[resp.GetMessage()]
			svc.mu.Unlock()
			if !handed {
				t.Fatalf("call %d, frame %d: the caller got a copy of the frame, not the frame sent", i, len(frames))
			}
			frames = append(frames, proto.CloneOf(resp.GetMessage()))
			// The caller owns the frame: it may change it.
			resp.Message.Timestamp = nil
			if o := resp.GetMessage().GetToolCallOutput(); o != nil {
				o.Output = "changed by the caller"
			}
			if p := resp.GetMessage().GetPartialToolCallOutput(); p != nil {
				p.Output = "changed by the caller"
			}
		}
		if err := omni.ValidateToolStream(call.GetToolCallId(), frames); err != nil {
			t.Fatal(err)
		}
		outputs = append(outputs, frames[len(frames)-1].GetToolCallOutput().GetOutput())
	}
	if outputs[0] != outputs[1] || outputs[0] == "" {
		t.Fatalf("the two reads said %q and %q", outputs[0], outputs[1])
	}
}
