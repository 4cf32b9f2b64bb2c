package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/e2e/e2etest"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit"
	"github.com/penguin-agent/penguin/internal/transcript"
)

// sseEvent is one event of the gateway's stream.
type sseEvent struct {
	id   int64
	name string // "" for an OmniMessage, "server_event", "error"
	data string
}

// sseReader reads SSE frames, counting the heartbeat comments it skips.
type sseReader struct {
	r          *bufio.Reader
	heartbeats atomic.Int64
}

// heartbeatsSeen is safe to call while another goroutine reads.
func (s *sseReader) heartbeatsSeen() int64 { return s.heartbeats.Load() }

// next returns the next event, or io.EOF when the stream ends.
func (s *sseReader) next() (sseEvent, error) {
	var ev sseEvent
	var fields bool
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return ev, err
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if fields {
				return ev, nil
			}
		case strings.HasPrefix(line, ":"):
			s.heartbeats.Add(1)
		case strings.HasPrefix(line, "id: "):
			fields = true
			n, err := strconv.ParseInt(strings.TrimPrefix(line, "id: "), 10, 64)
			if err != nil {
				return ev, fmt.Errorf("bad event id %q", line)
			}
			ev.id = n
		case strings.HasPrefix(line, "event: "):
			fields = true
			ev.name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			fields = true
			ev.data += strings.TrimPrefix(line, "data: ")
		}
	}
}

// openStream opens GET /api/sessions/{id}/stream, resuming after
// lastEventID when it is positive.
func openStream(ctx context.Context, t *testing.T, base, id string, lastEventID int64, query string) (*sseReader, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/api/sessions/"+id+"/stream"+query, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastEventID > 0 {
		req.Header.Set("Last-Event-ID", strconv.FormatInt(lastEventID, 10))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/event-stream" {
		body, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("stream: %s %s: %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	return &sseReader{r: bufio.NewReader(resp.Body)}, func() { cancel(); resp.Body.Close() }
}

// postJSON posts body and decodes the answer into out, checking the status.
func postJSON(ctx context.Context, t *testing.T, url, body string, want int, out any) {
	t.Helper()
	code, data := sendJSON(ctx, t, http.MethodPost, url, body)
	if code != want {
		t.Fatalf("POST %s: %d: %s", url, code, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("POST %s: %v: %s", url, err, data)
		}
	}
}

// sendJSON sends body (none when empty) to url with method and returns
// the answer's status code and body.
func sendJSON(ctx context.Context, t *testing.T, method, url, body string) (int, []byte) {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return resp.StatusCode, data
}

// sseResume starts a task over HTTP, drops the SSE connection in the
// middle of the run, reconnects with Last-Event-ID, and checks that every
// event arrived exactly once: ids strictly increase across the two
// connections with no gap, every persisted event of the history is among
// them, and the streamed text deltas add up to the complete messages.
func sseResume(t *testing.T, s *allInOne) {
	ctx := testkit.Context(t, 90*time.Second)
	base := "http://" + s.httpAddr
	ws := filepath.Join(s.root, "sse-ws")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	var sess struct {
		SessionID string `json:"session_id"`
	}
	postJSON(ctx, t, base+"/api/sessions", fmt.Sprintf(
		`{"model": {"provider": "sse", "model_id": "scripted"}, "workspace": %q, "approval_mode": "APPROVAL_MODE_ALLOW_ALL"}`, ws),
		http.StatusCreated, &sess)
	if sess.SessionID == "" {
		t.Fatal("POST /api/sessions returned no session_id")
	}

	// First connection: from the start of the log, then the task.
	first, closeFirst := openStream(ctx, t, base, sess.SessionID, 0, "")
	var task struct {
		FirstSequence int64 `json:"first_sequence,string"` // a string, as protojson writes int64
	}
	postJSON(ctx, t, base+"/api/sessions/"+sess.SessionID+"/tasks", `{"prompt": "count slowly"}`, http.StatusAccepted, &task)

	var got []sseEvent
	deltas := 0
	for deltas < 8 {
		ev, err := first.next()
		if err != nil {
			t.Fatalf("first connection ended early after %d events: %v", len(got), err)
		}
		got = append(got, ev)
		if ev.name == "" && strings.Contains(ev.data, `"partial_text"`) && strings.Contains(ev.data, `"delta"`) {
			deltas++
		}
	}
	closeFirst() // the connection drops mid-run
	dropped := got[len(got)-1].id

	// Second connection: resume after the last event seen, until idle.
	second, closeSecond := openStream(ctx, t, base, sess.SessionID, dropped, "?until_idle=1")
	defer closeSecond()
	for {
		ev, err := second.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("second connection: %v", err)
		}
		if ev.name == "error" {
			t.Fatalf("the stream reported an error: %s", ev.data)
		}
		got = append(got, ev)
	}
	if len(got) == 0 || got[len(got)-1].name != "server_event" || !strings.Contains(got[len(got)-1].data, `"state":"idle"`) ||
		!strings.Contains(got[len(got)-1].data, `"status":"completed"`) {
		t.Fatalf("the stream did not end with the idle state of a completed task; last event %+v", got[len(got)-1])
	}

	// Exactly once: strictly increasing ids, no gap from 1 to the end.
	for i, ev := range got {
		if ev.id != int64(i+1) {
			t.Fatalf("event %d has id %d, want %d (dropped after id %d); ids must be 1..n exactly once", i, ev.id, i+1, dropped)
		}
	}
	if dropped >= got[len(got)-1].id-5 {
		t.Errorf("the connection dropped at %d of %d: not in the middle of the run", dropped, got[len(got)-1].id)
	}
	if task.FirstSequence <= 1 || task.FirstSequence > dropped {
		t.Errorf("POST /tasks answered first_sequence %d", task.FirstSequence)
	}

	// Every persisted event is among them, with the same content.
	received := map[int64]sseEvent{}
	for _, ev := range got {
		received[ev.id] = ev
	}
	var text strings.Builder
	var completeTexts []string
	for _, ev := range got {
		if ev.name != "" {
			continue
		}
		m, err := transcript.Unmarshal([]byte(ev.data))
		if err != nil {
			t.Fatalf("event %d is not a trace line: %v: %s", ev.id, err, ev.data)
		}
		if p := m.GetPartialText(); p != nil && p.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
			text.WriteString(p.GetText())
		}
		if x := m.GetText(); x != nil && x.GetRole() == penguinv1.Role_ROLE_ASSISTANT {
			completeTexts = append(completeTexts, x.GetText())
		}
	}
	if want := strings.Join(completeTexts, ""); text.String() != want || want == "" {
		t.Errorf("the streamed deltas add up to %q, the complete texts to %q", text.String(), want)
	}
	hist := e2etest.History(ctx, t, e2etest.DialEngine(t, s.grpcAddr, ""), sess.SessionID)
	for _, h := range hist {
		ev, ok := received[h.GetSequence()]
		if !ok {
			t.Errorf("persisted event %d never arrived over SSE", h.GetSequence())
			continue
		}
		line, err := transcript.Marshal(h.GetMessage())
		if err != nil {
			t.Fatal(err)
		}
		if ev.data != string(line) {
			t.Errorf("event %d differs from the history:\nSSE:     %s\nhistory: %s", h.GetSequence(), ev.data, line)
		}
	}
	if len(hist) < 10 {
		t.Errorf("only %d persisted events", len(hist))
	}

	// An idle stream carries heartbeats (the server sends one every 200ms).
	idle, closeIdle := openStream(ctx, t, base, sess.SessionID, got[len(got)-1].id, "")
	defer closeIdle()
	beat := make(chan error, 1)
	go func() {
		_, err := idle.next() // nothing new happens: only heartbeats, until closed
		beat <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for idle.heartbeatsSeen() < 2 && time.Now().Before(deadline) {
		select {
		case err := <-beat:
			t.Fatalf("the idle stream ended or sent an event: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	closeIdle()
	<-beat
	if idle.heartbeatsSeen() < 2 {
		t.Errorf("saw %d heartbeats on an idle stream in 10s", idle.heartbeatsSeen())
	}
}
