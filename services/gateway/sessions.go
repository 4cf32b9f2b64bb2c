package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/transcript"
	"google.golang.org/grpc/codes"
)

// The session routes: one engine call each.

func (g *Gateway) listSessions(w http.ResponseWriter, r *http.Request) {
	size, err := queryInt32(r, "page_size")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	resp, err := g.engine.ListSessions(r.Context(), &penguinv1.ListSessionsRequest{
		PageSize: size, PageToken: r.URL.Query().Get("page_token"), ProjectId: r.URL.Query().Get("project_id"),
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
		badRequest(w, err.Error())
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

func (g *Gateway) processes(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.ListSessionProcesses(r.Context(), &penguinv1.ListSessionProcessesRequest{SessionId: r.PathValue("id")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) killProcess(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.KillSessionProcess(r.Context(), &penguinv1.KillSessionProcessRequest{SessionId: r.PathValue("id"), ProcessId: r.PathValue("processId")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) sessionDefaults(w http.ResponseWriter, r *http.Request) {
	resp, err := g.engine.GetSessionDefaults(r.Context(), &penguinv1.GetSessionDefaultsRequest{})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}

func (g *Gateway) updateSession(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.UpdateSessionRequest{}
	if err := readProto(r, req); err != nil {
		badRequest(w, err.Error())
		return
	}
	req.SessionId = r.PathValue("id")
	resp, err := g.engine.UpdateSession(r.Context(), req)
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

// historyEntry is one persisted event of GET /messages.
type historyEntry struct {
	Sequence string          `json:"sequence"`
	Message  json.RawMessage `json:"message"`
}

// messages returns the session's persisted history after ?after=N, all
// pages, each entry with its sequence number, and the sequence number a
// stream should resume after.
func (g *Gateway) messages(w http.ResponseWriter, r *http.Request) {
	after, err := queryInt(r, "after", math.MaxInt64)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	out := []historyEntry{}
	for {
		resp, err := g.engine.GetHistory(r.Context(), &penguinv1.GetHistoryRequest{SessionId: r.PathValue("id"), AfterSequence: after})
		if err != nil {
			g.fail(w, r, err)
			return
		}
		for _, ev := range resp.GetEvents() {
			msg, err := transcript.Marshal(ev.GetMessage())
			if err != nil {
				writeError(w, codes.Internal, "could not encode the history")
				return
			}
			out = append(out, historyEntry{Sequence: strconv.FormatInt(ev.GetSequence(), 10), Message: msg})
			after = ev.GetSequence()
		}
		if !resp.GetMore() || len(resp.GetEvents()) == 0 {
			break
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out, "last_sequence": strconv.FormatInt(after, 10)})
}

// trace downloads the session's log in the JSONL trace format
// (docs/trace-format.md).
func (g *Gateway) trace(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// ?context=N exports one context of a compacted session (1-based);
	// without it every context comes, in order, each from its session_meta.
	ctxIndex, err := queryInt32(r, "context")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	stream, err := g.engine.ExportTrace(r.Context(), &penguinv1.ExportTraceRequest{SessionId: id, ContextIndex: ctxIndex})
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
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if r.URL.Query().Get("download") != "0" {
		name := safeFileName(id)
		if ctxIndex > 0 {
			// The name `penguin sessions export` gives the same context.
			name = fmt.Sprintf("%s_%03d", name, ctxIndex)
		}
		w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s.jsonl"`, name))
	}
	for line := first; line != nil; {
		_, _ = io.WriteString(w, line.GetLine()+"\n")
		if line, err = stream.Recv(); err != nil {
			return
		}
	}
}

// safeFileName keeps the characters of a session id that are safe in a
// quoted Content-Disposition file name.
func safeFileName(id string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' {
			return r
		}
		return '_'
	}, id)
}

// startTask starts a task and answers 202 once the engine has accepted it,
// with the sequence number of its first event so a client can Attach from
// just before it. The task keeps running after this request ends; its
// events arrive on the stream.
func (g *Gateway) startTask(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.RunRequest{}
	if err := readProto(r, req); err != nil {
		badRequest(w, err.Error())
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
			writeError(w, codes.Internal, "the engine ended the run before its first event")
			return
		}
		g.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{
		"session_id": req.SessionId, "first_sequence": strconv.FormatInt(first.GetEvent().GetSequence(), 10),
	})
}

func (g *Gateway) steer(w http.ResponseWriter, r *http.Request) {
	req := &penguinv1.SteerRequest{}
	if err := readProto(r, req); err != nil {
		badRequest(w, err.Error())
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
		badRequest(w, err.Error())
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
		badRequest(w, err.Error())
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
		badRequest(w, err.Error())
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
		badRequest(w, err.Error())
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

// models serves GET /api/models: the llm service's ListModels.
func (g *Gateway) models(w http.ResponseWriter, r *http.Request) {
	if g.opts.LLM == nil {
		writeError(w, codes.Unimplemented, "this gateway has no llm service to list models from")
		return
	}
	resp, err := g.opts.LLM.ListModels(r.Context(), &penguinv1.ListModelsRequest{Provider: r.URL.Query().Get("provider")})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	writeProto(w, http.StatusOK, resp)
}
