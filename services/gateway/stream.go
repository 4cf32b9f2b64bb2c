package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/transcript"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// serverEvent is the payload of a named "server_event" SSE event: the run
// events that are not OmniMessages: approval requests and task state
// changes, each with a "type" field that names it.
type serverEvent struct {
	Type string `json:"type"`
	// ToolCall is the call of an approval request as a trace-format
	// OmniMessage, so its role reads "assistant" as in every other message.
	ToolCall json.RawMessage `json:"tool_call,omitempty"`
	Origin   []string        `json:"origin,omitempty"`
	// Permission is "r" or "rw" for an approval request.
	Permission string `json:"permission,omitempty"`
	// State is the session state of a task_state event.
	State string `json:"state,omitempty"`
	// Status is how the task ended, on the idle state.
	Status  string `json:"status,omitempty"`
	Message string `json:"message,omitempty"`
	// RetryInMs is the wait before the next reconnect, in retry_wait. A
	// JSON number: it is far below 2^53.
	RetryInMs int64 `json:"retry_in_ms,omitempty"`
	// NotRecorded marks the idle state of a task stopped because the
	// session log could not be written; the stream then ends with an
	// "error" event (unavailable).
	NotRecorded bool `json:"not_recorded,omitempty"`
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
		data, err = transcript.Marshal(e.Message)
	case *penguinv1.RunEvent_ApprovalRequest:
		name = "server_event"
		data, err = g.approvalEvent(e.ApprovalRequest)
	case *penguinv1.RunEvent_State:
		name = "server_event"
		data, err = json.Marshal(stateEvent(e.State))
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

// approvalEvent renders an approval request, its tool call in the encoding
// of every other message.
func (g *Gateway) approvalEvent(ar *penguinv1.ApprovalRequest) ([]byte, error) {
	call, err := transcript.Marshal(&penguinv1.OmniMessage{
		Timestamp: timestamppb.Now(),
		Origin:    ar.GetOrigin(),
		Payload:   &penguinv1.OmniMessage_ToolCall{ToolCall: ar.GetToolCall()},
	})
	if err != nil {
		return nil, err
	}
	return json.Marshal(serverEvent{
		Type: "approval_request", ToolCall: call, Origin: ar.GetOrigin(),
		Permission: enumword.Word(ar.GetPermission()),
	})
}

func stateEvent(s *penguinv1.RunStateChange) serverEvent {
	se := serverEvent{
		Type:        "task_state",
		State:       enumword.Word(s.GetState()),
		Message:     s.GetMessage(),
		RetryInMs:   s.GetRetryInMs(),
		NotRecorded: s.GetNotRecorded(),
	}
	if s.GetStatus() != penguinv1.StopReason_STOP_REASON_UNSPECIFIED {
		se.Status = enumword.Word(s.GetStatus())
	}
	return se
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

// received is one result of an engine stream: an item or the error that
// ended it (io.EOF for a clean end).
type received[T any] struct {
	item T
	err  error
}

// pump receives from an engine stream on its own goroutine, so the SSE
// loop can wait for an event, a heartbeat and the client at once. The
// channel closes after the stream's error, or when ctx ends.
func pump[T any](ctx context.Context, recv func() (T, error)) <-chan received[T] {
	out := make(chan received[T], 64)
	go func() {
		defer close(out)
		for {
			item, err := recv()
			select {
			case out <- received[T]{item, err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return out
}

// awaitFirst waits briefly for a stream's first result, so that a refusal
// (an unknown session) can still be an HTTP status. A stream with nothing
// to send yet (an idle session resumed at its last event) must not keep the
// response pending, though: after firstEventWait it opens anyway, with no
// first result. ok is false when the stream or the client is gone.
func awaitFirst[T any](ctx context.Context, events <-chan received[T]) (first *received[T], ok bool) {
	wait := time.NewTimer(firstEventWait)
	defer wait.Stop()
	select {
	case got, open := <-events:
		if !open {
			return nil, false
		}
		return &got, true
	case <-wait.C:
		return nil, true
	case <-ctx.Done():
		return nil, false
	}
}

// openSSE sends the headers of an event stream.
func openSSE(w http.ResponseWriter, flusher http.Flusher) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
}

// sseErrorEvent ends a stream with an "error" event, in the error shape of
// the HTTP routes.
func sseErrorEvent(w io.Writer, err error) {
	st := status.Convert(err)
	data, _ := json.Marshal(errorBody{Error: codeName(st.Code()), Message: st.Message()})
	fmt.Fprintf(w, "event: error\ndata: %s\n\n", data)
}

// relaySSE writes the stream's results as SSE frames, starting with first
// when set, with a heartbeat comment whenever the stream is quiet, until
// the stream ends or the client goes. An engine error becomes an "error"
// event; frames that cannot be encoded are logged and skipped.
func relaySSE[T any](ctx context.Context, w http.ResponseWriter, flusher http.Flusher, heartbeatEvery time.Duration,
	first *received[T], events <-chan received[T], frame func(T) ([]byte, error), logSkip func(error)) {
	heartbeat := time.NewTicker(heartbeatEvery)
	defer heartbeat.Stop()
	next := first
	for {
		if next != nil {
			if next.err != nil {
				if !errors.Is(next.err, io.EOF) && ctx.Err() == nil {
					sseErrorEvent(w, next.err)
					flusher.Flush()
				}
				return
			}
			if b, err := frame(next.item); err != nil {
				logSkip(err)
			} else if _, err := w.Write(b); err != nil {
				return
			}
			flusher.Flush()
			next = nil
		}
		select {
		case <-ctx.Done():
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

// serveSSE is the shape of both event streams: pump the engine stream,
// answer a refusal that comes at once as an HTTP error, else open the
// event stream and relay.
func serveSSE[T any](g *Gateway, w http.ResponseWriter, r *http.Request, recv func() (T, error), frame func(T) ([]byte, error)) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		writeError(w, codes.Internal, "streaming is not supported by this connection")
		return
	}
	events := pump(r.Context(), recv)
	first, ok := awaitFirst(r.Context(), events)
	if !ok {
		return
	}
	if first != nil && first.err != nil && !errors.Is(first.err, io.EOF) {
		g.fail(w, r, first.err)
		return
	}
	openSSE(w, flusher)
	relaySSE(r.Context(), w, flusher, g.opts.Heartbeat, first, events, frame, func(err error) {
		g.opts.Logger.Warn("gateway could not encode an event", "path", r.URL.Path, "error", err)
	})
}

// stream serves GET /api/sessions/{id}/stream: the session's events after
// the resume point, then the live run. ?until_idle=1 ends the stream when
// the session goes idle.
func (g *Gateway) stream(w http.ResponseWriter, r *http.Request) {
	after, err := resumePoint(r)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	untilIdle, err := queryBool(r, "until_idle")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	attach, err := g.engine.Attach(r.Context(), &penguinv1.AttachRequest{
		SessionId: r.PathValue("id"), AfterSequence: after, UntilIdle: untilIdle,
	})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	recv := func() (*penguinv1.RunEvent, error) {
		resp, err := attach.Recv()
		return resp.GetEvent(), err
	}
	serveSSE(g, w, r, recv, g.sseFrame)
}

// sessionEvents serves GET /api/events: the live session list for the
// sidebar (WatchSessions) as SSE. Each event is named after its kind:
// "session" with a SessionChange in protojson, "session_deleted" with
// {"session_id"}, and "snapshot_end" once the initial list is complete.
// A browser that reconnects gets a fresh snapshot, so the events carry
// no ids. ?snapshot_size=N bounds the snapshot.
func (g *Gateway) sessionEvents(w http.ResponseWriter, r *http.Request) {
	size, err := queryInt32(r, "snapshot_size")
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	watch, err := g.engine.WatchSessions(r.Context(), &penguinv1.WatchSessionsRequest{SnapshotSize: size})
	if err != nil {
		g.fail(w, r, err)
		return
	}
	serveSSE(g, w, r, watch.Recv, sessionListFrame)
}

// sessionListFrame renders one WatchSessions event.
func sessionListFrame(ev *penguinv1.WatchSessionsResponse) ([]byte, error) {
	var name string
	var data []byte
	var err error
	switch e := ev.GetEvent().(type) {
	case *penguinv1.WatchSessionsResponse_Session:
		name = "session"
		data, err = jsonOut.Marshal(e.Session)
	case *penguinv1.WatchSessionsResponse_DeletedSessionId:
		name = "session_deleted"
		data, err = json.Marshal(map[string]string{"session_id": e.DeletedSessionId})
	case *penguinv1.WatchSessionsResponse_SnapshotEnd:
		name, data = "snapshot_end", []byte("{}")
	default:
		return nil, errors.New("session list event has no payload")
	}
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "event: %s\ndata: %s\n\n", name, data), nil
}
