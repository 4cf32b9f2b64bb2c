package gateway_test

import (
	"net/http"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/gateway"
	"google.golang.org/grpc"
)

// TestApprovalRequestSpellsRolesLikeMessages: the tool call of an
// approval request is a trace-format message, its role "assistant" as in
// every message of the stream, never the proto enum name.
func TestApprovalRequestSpellsRolesLikeMessages(t *testing.T) {
	fake := strictEngine()
	fake.AttachFunc = func(r *penguinv1.AttachRequest, s grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
		return s.Send(&penguinv1.AttachResponse{Event: &penguinv1.RunEvent{Sequence: 4, Event: &penguinv1.RunEvent_ApprovalRequest{ApprovalRequest: &penguinv1.ApprovalRequest{
			ToolCall:   &penguinv1.ToolCall{Role: penguinv1.Role_ROLE_ASSISTANT, Name: "write_file", ToolCallId: "c1", Arguments: `{"file_path":"a"}`},
			Permission: penguinv1.Permission_PERMISSION_RW, Origin: []string{"child-1"},
		}}}})
	}
	web := start(t, fake, gateway.Options{})
	_, body := do(t, "GET", web.URL+"/api/sessions/s-1/stream?until_idle=1", "")
	ev := readEvents(t, strings.NewReader(body), 1)[0]
	if ev.name != "server_event" || strings.Contains(ev.data, "ROLE_") || !strings.Contains(ev.data, `"role":"assistant"`) ||
		!strings.Contains(ev.data, `"type":"model_msg"`) || !strings.Contains(ev.data, `"arguments":"{\"file_path\":\"a\"}"`) ||
		!strings.Contains(ev.data, `"origin":["child-1"]`) {
		t.Fatalf("approval request event: %+v", ev)
	}
}

// TestSessionEventsStream relays WatchSessions as named SSE events.
func TestSessionEventsStream(t *testing.T) {
	fake := strictEngine()
	fake.WatchSessionsFunc = func(r *penguinv1.WatchSessionsRequest, s grpc.ServerStreamingServer[penguinv1.WatchSessionsResponse]) error {
		if r.GetSnapshotSize() != 7 {
			t.Errorf("snapshot size %d", r.GetSnapshotSize())
		}
		for _, ev := range []*penguinv1.WatchSessionsResponse{
			{Event: &penguinv1.WatchSessionsResponse_Session{Session: &penguinv1.SessionChange{Session: &penguinv1.Session{SessionId: "a", State: penguinv1.SessionState_SESSION_STATE_IDLE}}}},
			{Event: &penguinv1.WatchSessionsResponse_SnapshotEnd{SnapshotEnd: &penguinv1.SnapshotEnd{}}},
			{Event: &penguinv1.WatchSessionsResponse_Session{Session: &penguinv1.SessionChange{Session: &penguinv1.Session{SessionId: "a", State: penguinv1.SessionState_SESSION_STATE_IDLE}, LastStatus: penguinv1.StopReason_STOP_REASON_FAILED, LastMessage: "boom"}}},
			{Event: &penguinv1.WatchSessionsResponse_DeletedSessionId{DeletedSessionId: "a"}},
		} {
			if err := s.Send(ev); err != nil {
				return err
			}
		}
		return nil
	}
	web := start(t, fake, gateway.Options{})
	resp, body := do(t, "GET", web.URL+"/api/events?snapshot_size=7", "")
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	evs := readEvents(t, strings.NewReader(body), 4)
	want := []struct{ name, data string }{
		{"session", `"session_id":"a"`},
		{"snapshot_end", `{}`},
		{"session", `"last_status":"STOP_REASON_FAILED"`},
		{"session_deleted", `{"session_id":"a"}`},
	}
	for i, w := range want {
		if evs[i].name != w.name || !strings.Contains(evs[i].data, w.data) {
			t.Fatalf("event %d: %+v, want %s with %s", i, evs[i], w.name, w.data)
		}
	}
}

func TestServesTheWebApp(t *testing.T) {
	app := fstest.MapFS{
		"index.html":         {Data: []byte("<!doctype html><title>Penguin</title>")},
		"assets/app-1a2b.js": {Data: []byte("console.log(1)"), ModTime: time.Now()},
	}
	web := start(t, strictEngine(), gateway.Options{App: app})
	for _, path := range []string{"/", "/sessions/s-1", "/usage"} {
		resp, body := do(t, "GET", web.URL+path, "")
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "<title>Penguin</title>") {
			t.Fatalf("%s: %d %s", path, resp.StatusCode, body)
		}
		if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
			t.Fatalf("%s: CSP %q", path, csp)
		}
	}
	resp, body := do(t, "GET", web.URL+"/assets/app-1a2b.js", "")
	if resp.StatusCode != http.StatusOK || body != "console.log(1)" || !strings.Contains(resp.Header.Get("Cache-Control"), "immutable") {
		t.Fatalf("asset: %d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp, body := do(t, "GET", web.URL+"/api/nothing", ""); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, `"not_found"`) {
		t.Fatalf("unknown API route: %d %s", resp.StatusCode, body)
	}
}
