// Package gateway serves Penguin's EngineService to browsers and curl as
// plain HTTP with JSON bodies and a Server-Sent Events stream. It holds no
// state of its own: every route is one EngineService call, so the gateway can
// sit in front of a local engine or a remote one, and the SSE stream resumes
// from Last-Event-ID because event ids are the session's sequence numbers.
package gateway

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/logger"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// EncodeFunc turns an OmniMessage into the single-line JSON sent as an SSE
// event. The reference sends its trace format; callers plug that encoder in.
type EncodeFunc func(*penguinv1.OmniMessage) ([]byte, error)

// Options configure a Gateway.
type Options struct {
	// AuthToken, when set, is required as "Authorization: Bearer <token>" on
	// every route.
	AuthToken string
	// Heartbeat is the interval of SSE comment lines that keep proxies from
	// closing an idle stream; zero means 20 seconds.
	Heartbeat time.Duration
	// Encode renders messages for the SSE stream and the history; nil means
	// protojson with the proto field names.
	Encode EncodeFunc
	// Logger receives one line per failed call; nil discards.
	Logger *slog.Logger
}

// Gateway is the HTTP face of an EngineService.
type Gateway struct {
	engine penguinv1.EngineServiceClient
	opts   Options
	mux    *http.ServeMux
}

var jsonOut = protojson.MarshalOptions{UseProtoNames: true}

// New returns a Gateway over engine.
func New(engine penguinv1.EngineServiceClient, opts Options) *Gateway {
	if opts.Heartbeat <= 0 {
		opts.Heartbeat = 20 * time.Second
	}
	if opts.Encode == nil {
		opts.Encode = func(m *penguinv1.OmniMessage) ([]byte, error) { return jsonOut.Marshal(m) }
	}
	opts.Logger = logger.OrDiscard(opts.Logger)
	g := &Gateway{engine: engine, opts: opts, mux: http.NewServeMux()}
	g.routes()
	return g
}

func (g *Gateway) routes() {
	g.mux.HandleFunc("GET /api/sessions", g.listSessions)
	g.mux.HandleFunc("POST /api/sessions", g.createSession)
	g.mux.HandleFunc("GET /api/sessions/{id}", g.getSession)
	g.mux.HandleFunc("DELETE /api/sessions/{id}", g.deleteSession)
	g.mux.HandleFunc("GET /api/sessions/{id}/messages", g.messages)
	g.mux.HandleFunc("GET /api/sessions/{id}/trace", g.trace)
	g.mux.HandleFunc("GET /api/sessions/{id}/stream", g.stream)
	g.mux.HandleFunc("POST /api/sessions/{id}/tasks", g.startTask)
	g.mux.HandleFunc("POST /api/sessions/{id}/steer", g.steer)
	g.mux.HandleFunc("POST /api/sessions/{id}/approvals/{toolCallId}", g.approve)
	g.mux.HandleFunc("POST /api/sessions/{id}/abort", g.abort)
	g.mux.HandleFunc("POST /api/sessions/{id}/retry-now", g.retryNow)
	g.mux.HandleFunc("POST /api/sessions/{id}/compact", g.compact)
	g.mux.HandleFunc("POST /api/sessions/{id}/fork", g.fork)
}

// ServeHTTP checks the bearer token and routes the request.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.opts.AuthToken != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(g.opts.AuthToken)) != 1 {
			writeError(w, http.StatusUnauthorized, "unauthenticated", "a valid bearer token is required")
			return
		}
	}
	g.mux.ServeHTTP(w, r)
}

// errorBody is the JSON shape of every error response.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

func writeError(w http.ResponseWriter, httpStatus int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_ = json.NewEncoder(w).Encode(errorBody{Error: code, Message: message})
}

// httpStatusOf maps a gRPC status code to the HTTP status a REST client
// expects.
var httpStatusOf = map[codes.Code]int{
	codes.InvalidArgument:    http.StatusBadRequest,
	codes.NotFound:           http.StatusNotFound,
	codes.AlreadyExists:      http.StatusConflict,
	codes.FailedPrecondition: http.StatusConflict,
	codes.Unauthenticated:    http.StatusUnauthorized,
	codes.PermissionDenied:   http.StatusForbidden,
	codes.Unavailable:        http.StatusServiceUnavailable,
	codes.DeadlineExceeded:   http.StatusGatewayTimeout,
	codes.Canceled:           499,
}

// fail writes a failed engine call as an HTTP error, keeping the engine's
// message: it was written for clients.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, err error) {
	st := status.Convert(err)
	code, ok := httpStatusOf[st.Code()]
	if !ok {
		code = http.StatusInternalServerError
	}
	g.opts.Logger.Info("gateway call failed", "method", r.Method, "path", r.URL.Path, "code", st.Code().String())
	writeError(w, code, strings.ToLower(st.Code().String()), st.Message())
}

func writeProto(w http.ResponseWriter, httpStatus int, m proto.Message) {
	b, err := jsonOut.Marshal(m)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", "could not encode the response")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(httpStatus)
	_, _ = w.Write(b)
}

// readProto decodes a JSON request body into m. Field names may be the
// proto names or their lowerCamelCase forms, and enums their names or
// numbers; unknown fields are refused so a typo is reported, not ignored.
func readProto(r *http.Request, m proto.Message) error {
	body, err := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if err := protojson.Unmarshal(body, m); err != nil {
		return fmt.Errorf("malformed JSON body: %w", err)
	}
	return nil
}

func (g *Gateway) listSessions(w http.ResponseWriter, r *http.Request) {
	size, _ := strconv.Atoi(r.URL.Query().Get("page_size"))
	resp, err := g.engine.ListSessions(r.Context(), &penguinv1.ListSessionsRequest{
		PageSize: int32(size), PageToken: r.URL.Query().Get("page_token"),
	})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) createSession(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.CreateSessionRequest{}
	if err := readProto(r, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	resp, err := g.engine.CreateSession(r.Context(), req)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusCreated, resp.GetSession())
}

func (g *Gateway) getSession(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.GetSession(r.Context(), &penguinv1.GetSessionRequest{SessionId: r.PathValue("id")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp.GetSession())
}

func (g *Gateway) deleteSession(w http.ResponseWriter, r *http.Request) {
	if _, err := g.engine.DeleteSession(r.Context(), &penguinv1.DeleteSessionRequest{SessionId: r.PathValue("id")}); err != nil {
		g.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// messages returns the session's persisted history, all pages, each entry
// with its sequence number.
func (g *Gateway) messages(w http.ResponseWriter, r *http.Request) {
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	var out []json.RawMessage
	for {
		resp, err := g.engine.GetHistory(r.Context(), &penguinv1.GetHistoryRequest{SessionId: r.PathValue("id"), AfterSequence: after})
		if err != nil {
			g.fail(w, r, err)
			return
		}
		for _, ev := range resp.GetEvents() {
			line, err := g.encodeEvent(ev)
			if err != nil {
				writeError(w, http.StatusInternalServerError, "internal", "could not encode the history")
				return
			}
			out = append(out, line)
			after = ev.GetSequence()
		}
		if !resp.GetMore() || len(resp.GetEvents()) == 0 {
			break
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"messages": out, "last_sequence": after})
}

// trace downloads the session's log in the reference's JSONL trace format.
func (g *Gateway) trace(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	stream, err := g.engine.ExportTrace(r.Context(), &penguinv1.ExportTraceRequest{SessionId: id})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	first, err := stream.Recv()
	if err != nil && !errors.Is(err, io.EOF) {
		g.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.jsonl"`, strings.ReplaceAll(id, `"`, "")))
	for line := first; line != nil; {
		_, _ = io.WriteString(w, line.GetLine()+"\n")
		if line, err = stream.Recv(); err != nil {
			return
		}
	}
}

// startTask starts a task and answers 202 once the engine has accepted it,
// with the sequence number of its first event so a client can Attach from
// just before it. The task keeps running after this request ends; its
// events arrive on the stream.
func (g *Gateway) startTask(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.RunRequest{}
	if err := readProto(r, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	req.SessionId = r.PathValue("id")
	// The run outlives this HTTP request, so the RPC must not inherit its
	// context; it is cancelled as soon as the first event proves the run
	// started, which only ends this subscription.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
	defer cancel()
	stream, err := g.engine.Run(ctx, req)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	first, err := stream.Recv()
	if err != nil {
		if errors.Is(err, io.EOF) {
			writeError(w, http.StatusInternalServerError, "internal", "the engine ended the run before its first event")
			return
		}
		g.fail(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_ = json.NewEncoder(w).Encode(map[string]any{"session_id": req.SessionId, "first_sequence": first.GetEvent().GetSequence()})
}

func (g *Gateway) steer(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.SteerRequest{}
	if err := readProto(r, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	req.SessionId = r.PathValue("id")
	if _, err := g.engine.Steer(r.Context(), req); err != nil {
		g.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (g *Gateway) approve(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.ApproveRequest{}
	if err := readProto(r, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	req.SessionId, req.ToolCallId = r.PathValue("id"), r.PathValue("toolCallId")
	if _, err := g.engine.Approve(r.Context(), req); err != nil {
		g.fail(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (g *Gateway) abort(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.AbortRequest{}
	if err := readProto(r, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	req.SessionId = r.PathValue("id")
	resp, err := g.engine.Abort(r.Context(), req)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	if !resp.GetAborted() {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

func (g *Gateway) retryNow(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.RetryNow(r.Context(), &penguinv1.RetryNowRequest{SessionId: r.PathValue("id")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) compact(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.CompactRequest{}
	if err := readProto(r, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	req.SessionId = r.PathValue("id")
	resp, err := g.engine.Compact(r.Context(), req)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) fork(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.ForkSessionRequest{}
	if err := readProto(r, req); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	req.SessionId = r.PathValue("id")
	resp, err := g.engine.ForkSession(r.Context(), req)
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusCreated, resp.GetSession())
}
