package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// grpcurl runs the pinned grpcurl with args after -plaintext, with no
// .proto files, so everything it knows comes from the server's reflection.
func grpcurl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin.grpcurl, append([]string{"-plaintext"}, args...)...)
	cmd.Env = proctest.Env(t)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("grpcurl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String()
}

// grpcurlSession lists the services through reflection, then drives a
// session from the shell: CreateSession with always-ask approval, Run
// streamed in the background, Approve when the approval request shows
// up, and GetHistory at the end.
func grpcurlSession(t *testing.T, s *allInOne) {
	ctx := testkit.Context(t, 2*time.Minute)

	list := grpcurl(ctx, t, s.grpcAddr, "list")
	for _, svc := range []string{"penguin.v1.LLMService", "penguin.v1.EnvironmentService", "penguin.v1.EngineService", "grpc.health.v1.Health"} {
		if !strings.Contains(list, svc+"\n") {
			t.Errorf("grpcurl list does not show %s:\n%s", svc, list)
		}
	}
	desc := grpcurl(ctx, t, s.grpcAddr, "describe", "penguin.v1.EngineService")
	if !strings.Contains(desc, "rpc Run ( .penguin.v1.RunRequest ) returns ( stream .penguin.v1.RunResponse )") {
		t.Errorf("grpcurl describe penguin.v1.EngineService:\n%s", desc)
	}

	ws := filepath.Join(s.root, "grpcurl-ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	created := grpcurl(ctx, t, "-d", fmt.Sprintf(
		`{"model": {"provider": "grpcurl", "model_id": "scripted"}, "workspace": %q, "approval_mode": "APPROVAL_MODE_ALWAYS_ASK"}`, ws),
		s.grpcAddr, "penguin.v1.EngineService/CreateSession")
	var cs struct {
		Session struct {
			SessionID string `json:"sessionId"`
		} `json:"session"`
	}
	if err := json.Unmarshal([]byte(created), &cs); err != nil || cs.Session.SessionID == "" {
		t.Fatalf("CreateSession answered %q (%v)", created, err)
	}
	id := cs.Session.SessionID

	// Run streams until the task ends; it waits on the approval meanwhile.
	runCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	run := exec.CommandContext(runCtx, bin.grpcurl, "-plaintext", "-d", fmt.Sprintf(`{"session_id": %q, "prompt": "leave a proof"}`, id),
		s.grpcAddr, "penguin.v1.EngineService/Run")
	run.Env = proctest.Env(t)
	var runOut syncBuffer
	run.Stdout, run.Stderr = &runOut, &runOut
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	callID := waitFor(t, &runOut, 60*time.Second, func(out string) (string, bool) {
		for _, obj := range jsonObjects(out) {
			var ev struct {
				Event struct {
					ApprovalRequest struct {
						ToolCall struct {
							ToolCallID string `json:"toolCallId"`
							Name       string `json:"name"`
						} `json:"toolCall"`
					} `json:"approvalRequest"`
				} `json:"event"`
			}
			if json.Unmarshal([]byte(obj), &ev) == nil && ev.Event.ApprovalRequest.ToolCall.ToolCallID != "" {
				return ev.Event.ApprovalRequest.ToolCall.ToolCallID, true
			}
		}
		return "", false
	})
	grpcurl(ctx, t, "-d", fmt.Sprintf(`{"session_id": %q, "tool_call_id": %q, "decision": "DECISION_ALLOW"}`, id, callID),
		s.grpcAddr, "penguin.v1.EngineService/Approve")
	if err := run.Wait(); err != nil {
		t.Fatalf("grpcurl Run: %v\n%s", err, runOut.String())
	}
	streamed := runOut.String()
	for _, want := range []string{`"approvalRequest"`, `"DECISION_ALLOW"`, `grpcurl-was-here`, `"STOP_REASON_COMPLETED"`, `proof.txt says grpcurl-was-here.`} {
		if !strings.Contains(streamed, want) {
			t.Errorf("the Run stream lacks %s:\n%s", want, streamed)
		}
	}

	hist := grpcurl(ctx, t, "-d", fmt.Sprintf(`{"session_id": %q}`, id), s.grpcAddr, "penguin.v1.EngineService/GetHistory")
	for _, want := range []string{`"sessionMeta"`, `"approvalDecision"`, `"DECISION_ALLOW"`, `grpcurl-was-here`} {
		if !strings.Contains(hist, want) {
			t.Errorf("GetHistory lacks %s:\n%s", want, hist)
		}
	}
	if strings.Contains(hist, "partialText") {
		t.Errorf("GetHistory holds partials:\n%s", hist)
	}
	proof, err := os.ReadFile(filepath.Join(ws, "proof.txt"))
	if err != nil || strings.TrimSpace(string(proof)) != "grpcurl-was-here" {
		t.Errorf("proof.txt = %q, %v", proof, err)
	}
}

// jsonObjects splits grpcurl's output, a sequence of pretty-printed JSON
// objects, into the objects.
func jsonObjects(out string) []string {
	dec := json.NewDecoder(strings.NewReader(out))
	var objs []string
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return objs
		}
		objs = append(objs, string(raw))
	}
}
