package gateway_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/fakeengine"
	"github.com/penguin-agent/penguin/services/gateway"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// start serves the gateway over HTTP in front of fake.
func start(t *testing.T, fake *fakeengine.Engine, opts gateway.Options) *httptest.Server {
	t.Helper()
	web := httptest.NewServer(gateway.New(fakeengine.Start(t, fake), opts))
	t.Cleanup(web.Close)
	return web
}

func do(t *testing.T, method, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestSessionRoutesMapEngineAnswers(t *testing.T) {
	var got *penguinv1.CreateSessionRequest
	fake := &fakeengine.Engine{
		CreateSessionFunc: func(_ context.Context, r *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error) {
			got = r
			return &penguinv1.CreateSessionResponse{Session: &penguinv1.Session{SessionId: "s-1", Model: r.GetModel()}}, nil
		},
		GetSessionFunc: func(_ context.Context, r *penguinv1.GetSessionRequest) (*penguinv1.GetSessionResponse, error) {
			return nil, status.Errorf(codes.NotFound, "session %q does not exist", r.GetSessionId())
		},
	}
	web := start(t, fake, gateway.Options{})

	resp, body := do(t, "POST", web.URL+"/api/sessions",
		`{"model":{"provider":"openai","model_id":"gpt-x"},"workspace":"/w","approval_mode":"APPROVAL_MODE_READ_ONLY"}`)
	if resp.StatusCode != http.StatusCreated || !strings.Contains(body, `"session_id":"s-1"`) {
		t.Fatalf("create: %d %s", resp.StatusCode, body)
	}
	if got.GetModel().GetModelId() != "gpt-x" || got.GetApprovalMode() != penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY {
		t.Fatalf("engine received %v", got)
	}

	resp, body = do(t, "POST", web.URL+"/api/sessions", `{"modle":{}}`)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "modle") {
		t.Fatalf("a misspelt field must be a 400 naming it: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "POST", web.URL+"/api/sessions", `{not json`)
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("malformed JSON: %d %s", resp.StatusCode, body)
	}
	resp, body = do(t, "GET", web.URL+"/api/sessions/nope", "")
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `session \"nope\" does not exist`) {
		t.Fatalf("unknown session: %d %s", resp.StatusCode, body)
	}
}

func TestTaskApprovalAndAbortRoutes(t *testing.T) {
	var mu sync.Mutex
	var approved *penguinv1.ApproveRequest
	busy := false
	fake := &fakeengine.Engine{
		RunFunc: func(r *penguinv1.RunRequest, s grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
			mu.Lock()
			defer mu.Unlock()
			if busy {
				return status.Error(codes.FailedPrecondition, "session is running a task")
			}
			if r.GetPrompt() == "" {
				return status.Error(codes.InvalidArgument, "prompt is empty")
			}
			busy = true
			return s.Send(&penguinv1.RunResponse{Event: &penguinv1.RunEvent{Sequence: 7, Event: &penguinv1.RunEvent_Message{Message: omni.UserText(r.GetPrompt())}}})
		},
		ApproveFunc: func(_ context.Context, r *penguinv1.ApproveRequest) (*penguinv1.ApproveResponse, error) {
			mu.Lock()
			approved = r
			mu.Unlock()
			return &penguinv1.ApproveResponse{}, nil
		},
		AbortFunc: func(context.Context, *penguinv1.AbortRequest) (*penguinv1.AbortResponse, error) {
			mu.Lock()
			defer mu.Unlock()
			was := busy
			busy = false
			return &penguinv1.AbortResponse{Aborted: was}, nil
		},
	}
	web := start(t, fake, gateway.Options{})
	base := web.URL + "/api/sessions/s-1"

	if resp, body := do(t, "POST", base+"/tasks", `{"prompt":""}`); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("empty prompt: %d %s", resp.StatusCode, body)
	}
	resp, body := do(t, "POST", base+"/tasks", `{"prompt":"fix the tests"}`)
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, `"first_sequence":"7"`) {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", base+"/tasks", `{"prompt":"again"}`); resp.StatusCode != http.StatusConflict {
		t.Fatalf("busy session: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "POST", base+"/approvals/call_3", `{"decision":"DECISION_ALLOW"}`); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("approve: %d %s", resp.StatusCode, body)
	}
	mu.Lock()
	if approved.GetToolCallId() != "call_3" || approved.GetDecision() != penguinv1.Decision_DECISION_ALLOW || approved.GetSessionId() != "s-1" {
		t.Fatalf("engine received %v", approved)
	}
	mu.Unlock()
	if resp, _ := do(t, "POST", base+"/abort", ""); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("abort while running: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "POST", base+"/abort", ""); resp.StatusCode != http.StatusNoContent {
		t.Fatalf("abort while idle: %d", resp.StatusCode)
	}
}

// sseEvent is one parsed SSE event.
type sseEvent struct{ id, name, data string }

// readEvents reads SSE events from body until n events have arrived.
func readEvents(t *testing.T, body io.Reader, n int) []sseEvent {
	t.Helper()
	sc := bufio.NewScanner(body)
	var out []sseEvent
	var cur sseEvent
	for len(out) < n && sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if cur.data != "" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			cur.data = strings.TrimPrefix(line, "data: ")
		}
	}
	if len(out) < n {
		t.Fatalf("stream ended after %d of %d events: %v", len(out), n, sc.Err())
	}
	return out
}

// TestStreamResumesFromLastEventID drops the SSE connection mid-run and
// reconnects with Last-Event-ID: every event arrives exactly once, in order.
func TestStreamResumesFromLastEventID(t *testing.T) {
	const total = 10
	log := make([]*penguinv1.RunEvent, 0, total)
	for i := 1; i <= total; i++ {
		ev := &penguinv1.RunEvent{Sequence: int64(i), Event: &penguinv1.RunEvent_Message{Message: omni.AssistantText("event " + string(rune('a'+i-1)))}}
		switch i {
		case 4:
			ev.Event = &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: &penguinv1.ApprovalRequest{
				ToolCall: &penguinv1.ToolCall{Name: "exec_command", ToolCallId: "c1", Arguments: `{"cmd":"ls"}`}, Permission: penguinv1.Permission_PERMISSION_RW,
			}}
		case total:
			ev.Event = &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{State: penguinv1.SessionState_SESSION_STATE_IDLE, Status: penguinv1.StopReason_STOP_REASON_COMPLETED}}
		}
		log = append(log, ev)
	}
	var mu sync.Mutex
	var afters []int64
	fake := &fakeengine.Engine{AttachFunc: func(r *penguinv1.AttachRequest, s grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
		mu.Lock()
		afters = append(afters, r.GetAfterSequence())
		mu.Unlock()
		if r.GetSessionId() != "s-1" {
			return status.Error(codes.NotFound, "no such session")
		}
		for _, ev := range log[r.GetAfterSequence():] {
			if err := s.Send(&penguinv1.AttachResponse{Event: ev}); err != nil {
				return err
			}
		}
		if r.GetUntilIdle() {
			return nil
		}
		<-s.Context().Done()
		return nil
	}}
	web := start(t, fake, gateway.Options{Heartbeat: 20 * time.Millisecond})

	if resp, body := do(t, "GET", web.URL+"/api/sessions/other/stream", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session stream: %d %s", resp.StatusCode, body)
	}
	if resp, body := do(t, "GET", web.URL+"/api/sessions/s-1/stream", "", "Last-Event-ID", "seven"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad Last-Event-ID: %d %s", resp.StatusCode, body)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", web.URL+"/api/sessions/s-1/stream", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	first := readEvents(t, resp.Body, 5)
	// Drop the connection mid-run, after the fifth event.
	cancel()
	resp.Body.Close()

	ctx2, cancel2 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel2()
	req2, _ := http.NewRequestWithContext(ctx2, "GET", web.URL+"/api/sessions/s-1/stream", nil)
	req2.Header.Set("Last-Event-ID", first[len(first)-1].id)
	resp2, err := http.DefaultClient.Do(req2)
	if err != nil {
		t.Fatal(err)
	}
	defer resp2.Body.Close()
	rest := readEvents(t, resp2.Body, total-5)
	// After the log is exhausted the stream idles: heartbeats must follow.
	if !sawHeartbeat(resp2.Body) {
		t.Fatal("no heartbeat on an idle stream")
	}

	all := append(first, rest...)
	for i, ev := range all {
		if want := int64(i + 1); ev.id != strconv.FormatInt(want, 10) {
			t.Fatalf("event %d has id %s: events lost or repeated across the reconnect", i, ev.id)
		}
	}
	if all[3].name != "server_event" || !strings.Contains(all[3].data, `"type":"approval_request"`) || !strings.Contains(all[3].data, `"permission":"rw"`) {
		t.Fatalf("approval request event: %+v", all[3])
	}
	var state map[string]any
	if err := json.Unmarshal([]byte(all[total-1].data), &state); err != nil || state["state"] != "idle" || state["status"] != "completed" {
		t.Fatalf("final state event: %s (%v)", all[total-1].data, err)
	}
	if !strings.Contains(all[0].data, "event a") {
		t.Fatalf("message event data: %s", all[0].data)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(afters) < 3 || afters[len(afters)-1] != 5 {
		t.Fatalf("engine saw resume points %v, want the last to be 5", afters)
	}
}

// sawHeartbeat reads body until a heartbeat comment arrives.
func sawHeartbeat(body io.Reader) bool {
	sc := bufio.NewScanner(body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), ": heartbeat") {
			return true
		}
	}
	return false
}

// TestStreamOfIdleSessionOpensAtOnce resumes a stream at the last event of
// an idle session: the engine has nothing to send, and the response must
// still open (headers, then heartbeats) instead of hanging until an event
// comes, which a browser would show as a connection that never opens.
func TestStreamOfIdleSessionOpensAtOnce(t *testing.T) {
	fake := &fakeengine.Engine{AttachFunc: func(r *penguinv1.AttachRequest, s grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
		<-s.Context().Done()
		return nil
	}}
	web := start(t, fake, gateway.Options{Heartbeat: 20 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", web.URL+"/api/sessions/s-1/stream", nil)
	req.Header.Set("Last-Event-ID", "42")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("the stream of an idle session did not open: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	if !sawHeartbeat(resp.Body) {
		t.Fatal("no heartbeat on an idle stream")
	}
}

func TestTraceDownload(t *testing.T) {
	fake := &fakeengine.Engine{ExportTraceFunc: func(r *penguinv1.ExportTraceRequest, s grpc.ServerStreamingServer[penguinv1.ExportTraceResponse]) error {
		if r.GetSessionId() != "s-1" {
			return status.Error(codes.NotFound, "no such session")
		}
		if r.GetContextIndex() == 2 {
			return s.Send(&penguinv1.ExportTraceResponse{Line: `{"type":"session_meta","n":2}`, ContextIndex: 2})
		}
		if r.GetContextIndex() != 0 {
			return status.Error(codes.NotFound, "the session has 2 contexts")
		}
		for _, l := range []string{`{"type":"session_meta"}`, `{"type":"model_msg"}`} {
			if err := s.Send(&penguinv1.ExportTraceResponse{Line: l}); err != nil {
				return err
			}
		}
		return nil
	}}
	web := start(t, fake, gateway.Options{})
	resp, body := do(t, "GET", web.URL+"/api/sessions/s-1/trace", "")
	if resp.StatusCode != http.StatusOK || body != "{\"type\":\"session_meta\"}\n{\"type\":\"model_msg\"}\n" {
		t.Fatalf("trace: %d %q", resp.StatusCode, body)
	}
	if resp, _ := do(t, "GET", web.URL+"/api/sessions/nope/trace", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("unknown session trace: %d", resp.StatusCode)
	}
	resp, body = do(t, "GET", web.URL+"/api/sessions/s-1/trace?context=2", "")
	if resp.StatusCode != http.StatusOK || body != "{\"type\":\"session_meta\",\"n\":2}\n" ||
		!strings.Contains(resp.Header.Get("Content-Disposition"), `filename="s-1_002.jsonl"`) {
		t.Fatalf("context 2: %d %q %q", resp.StatusCode, body, resp.Header.Get("Content-Disposition"))
	}
	if resp, _ := do(t, "GET", web.URL+"/api/sessions/s-1/trace?context=3", ""); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a context that does not exist: %d", resp.StatusCode)
	}
	if resp, _ := do(t, "GET", web.URL+"/api/sessions/s-1/trace?context=-1", ""); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("a negative context: %d", resp.StatusCode)
	}
}
