package gateway_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
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

// strictEngine answers every call the way the real engine does for a
// world with one session, "s-1": NotFound for any other id, InvalidArgument
// for an empty one, and an immediate, complete answer otherwise. Streams
// end at once, so every request of the tests below finishes.
func strictEngine() *fakeengine.Engine {
	check := func(id string) error {
		switch id {
		case "s-1":
			return nil
		case "":
			return status.Error(codes.InvalidArgument, "session_id is required")
		default:
			return status.Errorf(codes.NotFound, "session %q does not exist", id)
		}
	}
	sess := &penguinv1.Session{SessionId: "s-1", LastSequence: 1 << 40}
	return &fakeengine.Engine{
		CreateSessionFunc: func(_ context.Context, r *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error) {
			if r.GetModel().GetProvider() == "" || r.GetModel().GetModelId() == "" || r.GetWorkspace() == "" {
				return nil, status.Error(codes.InvalidArgument, "the model and the workspace are required")
			}
			return &penguinv1.CreateSessionResponse{Session: sess}, nil
		},
		GetSessionFunc: func(_ context.Context, r *penguinv1.GetSessionRequest) (*penguinv1.GetSessionResponse, error) {
			return &penguinv1.GetSessionResponse{Session: sess}, check(r.GetSessionId())
		},
		ListSessionsFunc: func(_ context.Context, r *penguinv1.ListSessionsRequest) (*penguinv1.ListSessionsResponse, error) {
			if r.GetPageToken() != "" {
				return nil, status.Error(codes.InvalidArgument, "page_token is not one this engine made")
			}
			return &penguinv1.ListSessionsResponse{Sessions: []*penguinv1.Session{sess}}, nil
		},
		DeleteSessionFunc: func(_ context.Context, r *penguinv1.DeleteSessionRequest) (*penguinv1.DeleteSessionResponse, error) {
			return &penguinv1.DeleteSessionResponse{}, check(r.GetSessionId())
		},
		ForkSessionFunc: func(_ context.Context, r *penguinv1.ForkSessionRequest) (*penguinv1.ForkSessionResponse, error) {
			return &penguinv1.ForkSessionResponse{Session: sess}, check(r.GetSessionId())
		},
		RunFunc: func(r *penguinv1.RunRequest, s grpc.ServerStreamingServer[penguinv1.RunResponse]) error {
			if err := check(r.GetSessionId()); err != nil {
				return err
			}
			if r.GetPrompt() == "" {
				return status.Error(codes.InvalidArgument, "prompt is empty")
			}
			return s.Send(&penguinv1.RunResponse{Event: &penguinv1.RunEvent{Sequence: 2, Event: &penguinv1.RunEvent_Message{Message: omni.UserText(r.GetPrompt())}}})
		},
		AttachFunc: func(r *penguinv1.AttachRequest, s grpc.ServerStreamingServer[penguinv1.AttachResponse]) error {
			return check(r.GetSessionId())
		},
		ApproveFunc: func(_ context.Context, r *penguinv1.ApproveRequest) (*penguinv1.ApproveResponse, error) {
			if err := check(r.GetSessionId()); err != nil {
				return nil, err
			}
			return nil, status.Errorf(codes.FailedPrecondition, "no approval is pending for %q", r.GetToolCallId())
		},
		SteerFunc: func(_ context.Context, r *penguinv1.SteerRequest) (*penguinv1.SteerResponse, error) {
			return &penguinv1.SteerResponse{}, check(r.GetSessionId())
		},
		AbortFunc: func(_ context.Context, r *penguinv1.AbortRequest) (*penguinv1.AbortResponse, error) {
			return &penguinv1.AbortResponse{}, check(r.GetSessionId())
		},
		RetryNowFunc: func(_ context.Context, r *penguinv1.RetryNowRequest) (*penguinv1.RetryNowResponse, error) {
			return &penguinv1.RetryNowResponse{}, check(r.GetSessionId())
		},
		CompactFunc: func(_ context.Context, r *penguinv1.CompactRequest) (*penguinv1.CompactResponse, error) {
			return &penguinv1.CompactResponse{}, check(r.GetSessionId())
		},
		GetHistoryFunc: func(_ context.Context, r *penguinv1.GetHistoryRequest) (*penguinv1.GetHistoryResponse, error) {
			return &penguinv1.GetHistoryResponse{}, check(r.GetSessionId())
		},
		ExportTraceFunc: func(r *penguinv1.ExportTraceRequest, s grpc.ServerStreamingServer[penguinv1.ExportTraceResponse]) error {
			return check(r.GetSessionId())
		},
		WatchSessionsFunc: func(r *penguinv1.WatchSessionsRequest, s grpc.ServerStreamingServer[penguinv1.WatchSessionsResponse]) error {
			return nil
		},
	}
}

// TestMalformedRequestsAre400 sends requests a browser, a script or an
// attacker could send with broken input: each must be refused with 400
// and the error code invalid_argument, never a 5xx.
func TestMalformedRequestsAre400(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{})
	cases := []struct {
		name, method, path, body string
		header                   []string
	}{
		{"invalid UTF-8 in the path", "GET", "/api/sessions/%ff%fe", "", nil},
		{"invalid UTF-8 in a nested path", "POST", "/api/sessions/s-1/approvals/%c3%28", `{"decision":"DECISION_ALLOW"}`, nil},
		{"invalid UTF-8 in the query", "GET", "/api/sessions?page_token=%ff", "", nil},
		{"invalid UTF-8 in a query name", "GET", "/api/sessions?%ff=1", "", nil},
		{"a broken escape in the query", "GET", "/api/sessions?page_token=%zz", "", nil},
		{"page_size above int32", "GET", "/api/sessions?page_size=4294967297", "", nil},
		{"negative page_size", "GET", "/api/sessions?page_size=-1", "", nil},
		{"page_size not a number", "GET", "/api/sessions?page_size=ten", "", nil},
		{"after not a number", "GET", "/api/sessions/s-1/messages?after=x", "", nil},
		{"after above int64", "GET", "/api/sessions/s-1/messages?after=99999999999999999999", "", nil},
		{"a Last-Event-ID that is no number", "GET", "/api/sessions/s-1/stream", "", []string{"Last-Event-ID", "seven"}},
		{"a negative after", "GET", "/api/sessions/s-1/stream?after=-3", "", nil},
		{"until_idle not a boolean", "GET", "/api/sessions/s-1/stream?until_idle=maybe", "", nil},
		{"snapshot_size above int32", "GET", "/api/events?snapshot_size=3000000000", "", nil},
		{"JSON that does not parse", "POST", "/api/sessions", `{not json`, nil},
		{"a JSON array", "POST", "/api/sessions/s-1/tasks", `[1,2]`, nil},
		{"an unknown field", "POST", "/api/sessions", `{"modle":{}}`, nil},
		{"a wrong type", "POST", "/api/sessions/s-1/steer", `{"text": 5}`, nil},
		{"an unknown enum name", "POST", "/api/sessions/s-1/approvals/c1", `{"decision":"DECISION_MAYBE"}`, nil},
		{"invalid UTF-8 inside a JSON string", "POST", "/api/sessions/s-1/tasks", "{\"prompt\": \"\xff\xfe\"}", nil},
		{"int32 overflow in the body", "POST", "/api/sessions", `{"max_turns": 2147483648}`, nil},
		{"a fork point that is no number", "POST", "/api/sessions/s-1/fork", `{"up_to_sequence": "abc"}`, nil},
		{"an empty prompt", "POST", "/api/sessions/s-1/tasks", `{"prompt": ""}`, nil},
		{"a goal budget that is not a number", "POST", "/api/sessions/s-1/tasks", `{"prompt": "fix it", "goal": {"budget": "lots"}}`, nil},
		{"a goal that is not an object", "POST", "/api/sessions/s-1/tasks", `{"prompt": "fix it", "goal": 500}`, nil},
		{"a session without a model", "POST", "/api/sessions", `{}`, nil},
		{"a provider form that is not JSON", "POST", "/api/setup/provider", `name=openai`, nil},
		{"a token field of the wrong type at sign-in", "POST", "/api/auth/login", `{"token": 1}`, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			resp, body := do(t, c.method, web.URL+c.path, c.body, c.header...)
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("%s %s: %d %s, want 400", c.method, c.path, resp.StatusCode, body)
			}
			var e struct{ Error, Message string }
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error != "invalid_argument" || e.Message == "" {
				t.Fatalf("error body %q (%v): want error invalid_argument with a message", body, err)
			}
		})
	}
}

// TestErrorCodesAreSnakeCase checks the one spelling of error codes: the
// gateway's own refusals and the engine's answers alike.
func TestErrorCodesAreSnakeCase(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{})
	for _, c := range []struct {
		method, path, body string
		status             int
		code               string
	}{
		{"GET", "/api/sessions/nope", "", http.StatusNotFound, "not_found"},
		{"POST", "/api/sessions/s-1/approvals/c9", `{"decision":"DECISION_ALLOW"}`, http.StatusConflict, "failed_precondition"},
		{"GET", "/api/sessions?page_size=x", "", http.StatusBadRequest, "invalid_argument"},
		{"GET", "/api/no-such-route", "", http.StatusNotFound, "not_found"},
		{"GET", "/api/models", "", http.StatusNotImplemented, "unimplemented"},
	} {
		resp, body := do(t, c.method, web.URL+c.path, c.body)
		if resp.StatusCode != c.status || !strings.Contains(body, `"error":"`+c.code+`"`) {
			t.Errorf("%s %s: %d %s, want %d with error %q", c.method, c.path, resp.StatusCode, body, c.status, c.code)
		}
	}
}

// TestNumbersFollowTheProtoJSONMapping: 64-bit integers are strings in
// every JSON body the gateway writes, as protojson writes them.
func TestNumbersFollowTheProtoJSONMapping(t *testing.T) {
	web := start(t, strictEngine(), gateway.Options{})
	_, body := do(t, "GET", web.URL+"/api/sessions/s-1", "")
	if !strings.Contains(body, `"last_sequence":"1099511627776"`) {
		t.Fatalf("session: %s", body)
	}
	_, body = do(t, "POST", web.URL+"/api/sessions/s-1/tasks", `{"prompt":"hi"}`)
	if !strings.Contains(body, `"first_sequence":"2"`) {
		t.Fatalf("task: %s", body)
	}
	_, body = do(t, "GET", web.URL+"/api/sessions/s-1/messages?after=5", "")
	if !strings.Contains(body, `"last_sequence":"5"`) {
		t.Fatalf("messages: %s", body)
	}
	// A request may give them either way, as protojson reads them.
	if resp, body := do(t, "POST", web.URL+"/api/sessions/s-1/fork", `{"up_to_sequence":"12"}`); resp.StatusCode != http.StatusCreated {
		t.Fatalf("fork with a string: %d %s", resp.StatusCode, body)
	}
}

// FuzzNoServerErrors sends arbitrary requests: whatever they hold, the
// gateway answers below 500 (the strict engine never fails on its own).
func FuzzNoServerErrors(f *testing.F) {
	seeds := []struct{ method, path, query, body string }{
		{"GET", "/api/sessions", "page_size=10", ""},
		{"GET", "/api/sessions/%ff%fe", "", ""},
		{"GET", "/api/sessions", "page_token=%ff", ""},
		{"POST", "/api/sessions", "", `{"model":{"provider":"p","model_id":"m"},"workspace":"/w"}`},
		{"POST", "/api/sessions/s-1/tasks", "", `{"prompt":"\u00ff"}`},
		{"POST", "/api/sessions/s-1/approvals/c1", "", `{"decision":"DECISION_DENY"}`},
		{"GET", "/api/sessions/s-1/messages", "after=3", ""},
		{"GET", "/api/sessions/s-1/stream", "until_idle=1", ""},
		{"DELETE", "/api/sessions/s-1", "", ""},
		{"POST", "/api/sessions/s-1/fork", "", `{"up_to_sequence":"-1"}`},
		{"GET", "/api/sessions/s-1/trace", "", ""},
		{"POST", "/api/setup/provider", "", `{"name":"x"}`},
		{"PUT", "/api/sessions/s-1", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, s.query, s.body)
	}
	web := httptest.NewServer(gateway.New(fakeengine.Start(f, strictEngine()), gateway.Options{LLM: startLLM(f, "", "")}))
	f.Cleanup(web.Close)
	client := &http.Client{Timeout: 10 * time.Second}
	f.Fuzz(func(t *testing.T, method, path, query, body string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n()<>@,;:\\\"/[]?={}") {
			method = "GET"
		}
		req, err := http.NewRequest(method, web.URL, strings.NewReader(body))
		if err != nil {
			t.Skip()
		}
		req.URL.Path = "/" + strings.TrimPrefix(path, "/")
		req.URL.RawPath = ""
		req.URL.RawQuery = query
		if strings.ContainsAny(req.URL.RawQuery, " #\r\n\x00") {
			t.Skip()
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Skip() // the client refused to send it
		}
		defer resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s?%s %q: %d", method, req.URL.Path, query, body, resp.StatusCode)
		}
	})
}
