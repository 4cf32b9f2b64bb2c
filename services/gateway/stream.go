package gateway

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/grpc/status"
)

// serverEvent is the payload of a named "server_event" SSE event: the run
// events that are not OmniMessages, shaped like the reference's ServerEvent.
type serverEvent struct {
	Type     string          `json:"type"`
	ToolCall json.RawMessage `json:"tool_call,omitempty"`
	Origin   []string        `json:"origin,omitempty"`
	// Permission is "r" or "rw" for an approval request.
	Permission string `json:"permission,omitempty"`
	// State is the session state of a task_state event.
	State string `json:"state,omitempty"`
	// Status is how the task ended, on the idle state.
	Status    string `json:"status,omitempty"`
	Message   string `json:"message,omitempty"`
	RetryInMs int64  `json:"retry_in_ms,omitempty"`
}

// enumWord turns a proto enum name such as SESSION_STATE_AWAITING_APPROVAL
// into the reference's lower-case word (awaiting_approval).
func enumWord(name, prefix string) string {
	return strings.ToLower(strings.TrimPrefix(name, prefix))
}

// sseFrame renders one run event as an SSE frame whose id is the session's
// sequence number, so a browser's automatic reconnect resumes exactly after
// the last event it saw.
func (g *Gateway) sseFrame(ev *penguinv1.RunEvent) ([]byte, error) {
	var name string
	var data []byte
	var err error
	switch e := ev.GetEvent().(type) {
	case *penguinv1.RunEvent_Message:
		data, err = g.opts.Encode(e.Message)
	case *penguinv1.RunEvent_ApprovalRequest:
		name = "server_event"
		var call []byte
		if call, err = jsonOut.Marshal(e.ApprovalRequest.GetToolCall()); err == nil {
			data, err = json.Marshal(serverEvent{
				Type: "approval_request", ToolCall: call, Origin: e.ApprovalRequest.GetOrigin(),
				Permission: enumWord(e.ApprovalRequest.GetPermission().String(), "PERMISSION_"),
			})
		}
	case *penguinv1.RunEvent_State:
		name = "server_event"
		se := serverEvent{
			Type:      "task_state",
			State:     enumWord(e.State.GetState().String(), "SESSION_STATE_"),
			Message:   e.State.GetMessage(),
			RetryInMs: e.State.GetRetryInMs(),
		}
		if e.State.GetStatus() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
			se.Status = enumWord(e.State.GetStatus().String(), "STOP_REASON_")
		}
		data, err = json.Marshal(se)
	default:
		return nil, fmt.Errorf("run event %d has no payload", ev.GetSequence())
	}
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "id: %d\n", ev.GetSequence())
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	fmt.Fprintf(&b, "data: %s\n\n", data)
	return []byte(b.String()), nil
}

// encodeEvent renders one persisted event for the history route.
func (g *Gateway) encodeEvent(ev *penguinv1.RunEvent) (json.RawMessage, error) {
	msg, err := g.opts.Encode(ev.GetMessage())
	if err != nil {
		return nil, err
	}
	return json.Marshal(struct {
		Sequence int64           `json:"sequence"`
		Message  json.RawMessage `json:"message"`
	}{ev.GetSequence(), msg})
}

// firstEventWait bounds how long a stream waits for its first event
// before it sends its headers.
const firstEventWait = 250 * time.Millisecond

// resumePoint is the sequence number a stream starts after: the
// Last-Event-ID header a browser sends on reconnect, else the "after" query
// parameter, else zero (the whole log).
func resumePoint(r *http.Request) (int64, error) {
	raw := r.Header.Get("Last-Event-ID")
	if raw == "" {
		raw = r.URL.Query().Get("after")
	}
	if raw == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("event id %q is not a sequence number", raw)
	}
	return n, nil
}

// stream serves GET /api/sessions/{id}/stream: the session's events after
// the resume point, then the live run, with a heartbeat comment so idle
// connections survive proxies. ?until_idle=1 ends the stream when the
// session goes idle.
func (g *Gateway) stream(w http.ResponseWriter, r *http.Request) {
	after, err := resumePoint(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_argument", err.Error())
		return
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, http.StatusInternalServerError, "internal", "streaming is not supported by this connection")
		return
	}
	untilIdle := r.URL.Query().Get("until_idle") == "1" || r.URL.Query().Get("until_idle") == "true"
	attach, err := g.engine.Attach(r.Context(), &penguinv1.AttachRequest{
		SessionId: r.PathValue("id"), AfterSequence: after, UntilIdle: untilIdle,
	})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	// The first Recv surfaces NotFound and other refusals while an HTTP
	// status can still say so.
	type received struct {
		ev  *penguinv1.RunEvent
		err error
	}
	events := make(chan received, 64)
	go func() {
		defer close(events)
		for {
			resp, err := attach.Recv()
			select {
			case events <- received{resp.GetEvent(), err}:
			case <-r.Context().Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	// Wait briefly for the first event, so a refusal (an unknown session)
	// can still be an HTTP status. A session that has nothing to send yet
	// (idle, resumed at its last event) must not keep the response
	// pending, though: after firstEventWait the stream opens anyway, and
	// heartbeats flow.
	var next *received
	wait := time.NewTimer(firstEventWait)
	select {
	case got, open := <-events:
		wait.Stop()
		if !open {
			return
		}
		if got.err != nil && !errors.Is(got.err, io.EOF) {
			g.fail(w, r, got.err)
			return
		}
		next = &got
	case <-wait.C:
	case <-r.Context().Done():
		wait.Stop()
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()

	heartbeat := time.NewTicker(g.opts.Heartbeat)
	defer heartbeat.Stop()
	for {
		if next != nil {
			if next.err != nil {
				if !errors.Is(next.err, io.EOF) && r.Context().Err() == nil {
					st := status.Convert(next.err)
					data, _ := json.Marshal(errorBody{Error: strings.ToLower(st.Code().String()), Message: st.Message()})
					fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
					flusher.Flush()
				}
				return
			}
			frame, err := g.sseFrame(next.ev)
			if err != nil {
				g.opts.Logger.Warn("gateway could not encode an event", "session", r.PathValue("id"), "error", err)
			} else if _, err := w.Write(frame); err != nil {
				return
			}
			flusher.Flush()
			next = nil
		}
		select {
		case <-r.Context().Done():
			return
		case <-heartbeat.C:
			if _, err := io.WriteString(w, ": heartbeat\n\n"); err != nil {
				return
			}
			flusher.Flush()
		case got, open := <-events:
			if !open {
				return
			}
			next = &got
		}
	}
}
