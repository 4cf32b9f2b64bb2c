package gateway_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/trace"
	"github.com/penguin-agent/penguin/services/gateway"
	"github.com/penguin-agent/penguin/services/llm/providers"
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
	web := start(t, fake, gateway.Options{Encode: trace.Marshal})
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

func TestFirstRunProviderForm(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{})
	form := `{"name":"openai","type":"openai","api_key":"sk-test-123","models":["gpt-4o"]}`
	if resp, body := do(t, "POST", web.URL+"/api/setup/provider", form); resp.StatusCode != http.StatusConflict || !strings.Contains(body, "--providers") {
		t.Fatalf("without a providers file: %d %s", resp.StatusCode, body)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "providers.yaml")
	existing := "# my routes\nproviders:\n  - name: local\n    type: openai\n    base_url: http://127.0.0.1:9/v1\n    api_key_env: LOCAL_KEY # kept\n"
	if err := os.WriteFile(file, []byte(existing), 0o644); err != nil {
		t.Fatal(err)
	}
	web = start(t, strictEngine(), gateway.Options{ProvidersFile: file})
	if _, body := do(t, "GET", web.URL+"/api/setup", ""); !strings.Contains(body, file) {
		t.Fatalf("setup status: %s", body)
	}
	for _, bad := range []string{
		`{"name":"../evil","type":"openai","api_key":"k"}`,
		`{"name":"x","type":"gemini","api_key":"k"}`,
		`{"name":"x","type":"openai","api_key":"two words"}`,
		`{"name":"x","type":"openai","api_key":"k","base_url":"file:///etc"}`,
		`{"name":"x","type":"openai","api_key":"k","models":["a","a"]}`,
		`{"name":"x","type":"openai","api_key":"k","extra":1}`,
	} {
		if resp, body := do(t, "POST", web.URL+"/api/setup/provider", bad); resp.StatusCode/100 != 4 {
			t.Fatalf("form %s: %d %s", bad, resp.StatusCode, body)
		}
	}
	if got, _ := os.ReadFile(file); string(got) != existing {
		t.Fatalf("a refused form changed the file:\n%s", got)
	}

	resp, body := do(t, "POST", web.URL+"/api/setup/provider", form)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("form: %d %s", resp.StatusCode, body)
	}
	f, err := providers.Load(file)
	if err != nil {
		t.Fatalf("the written file does not load: %v", err)
	}
	if len(f.Providers) != 2 || f.Providers[0].Name != "local" || f.Providers[1].Name != "openai" || f.Providers[1].Models[0].ID != "gpt-4o" {
		t.Fatalf("routes %+v", f.Providers)
	}
	keyFile := f.Providers[1].APIKeyFile
	if keyFile != filepath.Join(dir, "openai.key") {
		t.Fatalf("key file %q", keyFile)
	}
	fi, err := os.Stat(keyFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v (%v)", fi.Mode(), err)
	}
	raw, _ := os.ReadFile(file)
	if strings.Contains(string(raw), "sk-test-123") || !strings.Contains(string(raw), "# my routes") || !strings.Contains(string(raw), "# kept") {
		t.Fatalf("providers file:\n%s", raw)
	}
	// The same name again replaces the route and its key.
	if resp, body := do(t, "POST", web.URL+"/api/setup/provider", `{"name":"openai","type":"openai","api_key":"sk-new"}`); resp.StatusCode != http.StatusOK {
		t.Fatalf("replace: %d %s", resp.StatusCode, body)
	}
	f, err = providers.Load(file)
	if err != nil || len(f.Providers) != 2 || len(f.Providers[1].Models) != 0 {
		t.Fatalf("after replacing: %+v %v", f, err)
	}
	if key, _ := os.ReadFile(keyFile); strings.TrimSpace(string(key)) != "sk-new" {
		t.Fatalf("key %q", key)
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
