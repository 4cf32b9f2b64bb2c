// Package floor is the floor under the benchmark task's per-task overhead
// (docs/performance.md, "Per-task overhead"): the least server that does
// what the task needs, with the parts and guarantees Penguin's server has
// and nothing else. It answers the same client calls on real gRPC with
// penguin's flow-control windows (CreateSession, then Run streaming the
// task's events back), makes the same two streamed model calls over HTTP
// with the request bodies Penguin sends, reads the file beneath an
// os.Root, and records the same events in SQLite with the store's
// settings, in as many transactions as Penguin commits a task. It has no
// authentication, no journal, no environment service, no sandbox, no
// agent state, no metrics and no tracing: those are what Penguin is above
// the floor.
//
// It serves the benchmark's task only: one tool call, read_file, against
// an OpenAI-compatible model. The agent's constants (the system prompt and
// tool list in the first request's body, the tool list and session
// metadata the log records) come from a Plan that the benchmark takes
// from a Penguin task of the same run. cmd is e2e/bench/floorserver.
package floor

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Plan is what the floor server takes from Penguin: the agent's
// constants, which Penguin builds from the agent state at each session
// and the floor does not.
type Plan struct {
	// Request is the body of a task's first model request as Penguin
	// sent it: the system prompt, the prompt and the tools.
	Request []byte `json:"request"`
	// ToolList and SessionMeta are the session's tool_list_ready and
	// session_meta messages (penguinv1.OmniMessage in the wire format).
	ToolList    []byte `json:"tool_list"`
	SessionMeta []byte `json:"session_meta"`
	// Config is the session row's config column.
	Config []byte `json:"config"`
}

// ReadPlan reads a Plan written as JSON.
func ReadPlan(path string) (*Plan, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var p Plan
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	return &p, nil
}

// CommitsPerTask is how many transactions a task commits, CreateSession's
// among them: Penguin's five (services/engine's TestTaskCommits).
const CommitsPerTask = 5

// Counts are what a floor server did since it started, for the
// benchmark's checks that it did the work it is measured for.
type Counts struct {
	Tasks, ModelCalls, Reads, Commits int64
}

// Server is the floor server's engine service.
type Server struct {
	penguinv1.UnimplementedEngineServiceServer

	modelURL string // the chat completions endpoint
	http     *http.Client
	store    *Store // nil: the log is not recorded
	// head and tail are the first request's body split where its
	// messages end: the second request puts the model's tool call and
	// its output between them.
	head, tail        []byte
	toolList, meta    *penguinv1.OmniMessage
	config            []byte
	mu                sync.Mutex
	sessions          map[string]*session
	tasks, calls, rds atomic.Int64
}

// session is what a task needs of its session: the floor keeps it in
// memory rather than reading the row back.
type session struct {
	id, workspace string
	model         *penguinv1.ModelRef
	mode          penguinv1.ApprovalMode
	created       time.Time
	seq           int64
	usage         penguinv1.TokenCounts
	running       bool
}

// New returns a floor server that calls the model at baseURL (an
// OpenAI-compatible API's base, such as http://host/v1) and records in
// store, or records nothing when store is nil.
func New(plan *Plan, baseURL string, store *Store) (*Server, error) {
	head, tail, err := SplitRequest(plan.Request)
	if err != nil {
		return nil, err
	}
	s := &Server{
		modelURL: strings.TrimSuffix(baseURL, "/") + "/chat/completions",
		http:     &http.Client{},
		store:    store,
		head:     head, tail: tail,
		toolList: &penguinv1.OmniMessage{}, meta: &penguinv1.OmniMessage{},
		config:   plan.Config,
		sessions: map[string]*session{},
	}
	if err := proto.Unmarshal(plan.ToolList, s.toolList); err != nil || s.toolList.GetToolListReady() == nil {
		return nil, fmt.Errorf("plan: the tool list is not a tool_list_ready message (%v)", err)
	}
	if err := proto.Unmarshal(plan.SessionMeta, s.meta); err != nil || s.meta.GetSessionMeta() == nil {
		return nil, fmt.Errorf("plan: the session metadata is not a session_meta message (%v)", err)
	}
	return s, nil
}

// Counts returns what the server did so far.
func (s *Server) Counts() Counts {
	c := Counts{Tasks: s.tasks.Load(), ModelCalls: s.calls.Load(), Reads: s.rds.Load()}
	if s.store != nil {
		c.Commits = s.store.Commits()
	}
	return c
}

// CreateSession records the session's row and its session_meta in one
// transaction, as Penguin's CreateSession does.
func (s *Server) CreateSession(ctx context.Context, req *penguinv1.CreateSessionRequest) (*penguinv1.CreateSessionResponse, error) {
	if !filepath.IsAbs(req.GetWorkspace()) || req.GetModel().GetModelId() == "" {
		return nil, status.Error(codes.InvalidArgument, "the floor server takes an absolute workspace and a model")
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	now := time.Now().UTC()
	sess := &session{
		id:        "session-" + now.Format("2006-01-02-15-04-05") + "-" + hex.EncodeToString(rnd[:]),
		workspace: req.GetWorkspace(), model: req.GetModel(), mode: req.GetApprovalMode(), created: now, seq: 1,
	}
	meta := proto.Clone(s.meta).(*penguinv1.OmniMessage)
	meta.Timestamp = timestamppb.New(now)
	m := meta.GetSessionMeta()
	m.SessionId, m.Workspace, m.Provider, m.ModelId = sess.id, sess.workspace, sess.model.GetProvider(), sess.model.GetModelId()
	if s.store != nil {
		payload, err := proto.Marshal(meta)
		if err != nil {
			return nil, status.Error(codes.Internal, err.Error())
		}
		if err := s.store.Create(ctx, sess, s.config, Event{Seq: 1, Kind: "session_meta", Payload: payload}); err != nil {
			return nil, status.Error(codes.Unavailable, err.Error())
		}
	}
	s.mu.Lock()
	s.sessions[sess.id] = sess
	s.mu.Unlock()
	ts := timestamppb.New(now)
	return &penguinv1.CreateSessionResponse{Session: &penguinv1.Session{
		SessionId: sess.id, Model: sess.model, Workspace: sess.workspace, ApprovalMode: sess.mode,
		State: penguinv1.SessionState_SESSION_STATE_IDLE, CreatedAt: ts, UpdatedAt: ts, LastSequence: 1,
		ProjectId: "default", Agent: "default",
	}}, nil
}

// Run runs the task: the prompt, the first model call, the read_file it
// asks for, the second model call; streaming every event and recording
// the log's in Penguin's five transactions a task (with CreateSession's):
// the lease with the prompt, the tool list and the title; the first
// request's events with the environment's binding; the tool's output
// with the second request's start; the second request's events with the
// usage, and the lease released.
func (s *Server) Run(req *penguinv1.RunRequest, stream penguinv1.EngineService_RunServer) error {
	ctx := stream.Context()
	s.mu.Lock()
	sess := s.sessions[req.GetSessionId()]
	busy := sess != nil && sess.running
	if sess != nil {
		sess.running = true
	}
	s.mu.Unlock()
	if sess == nil {
		return status.Errorf(codes.NotFound, "no session %q", req.GetSessionId())
	}
	if busy {
		return status.Errorf(codes.FailedPrecondition, "session %s is running", sess.id)
	}
	defer func() {
		s.mu.Lock()
		sess.running = false
		s.mu.Unlock()
	}()
	t := &task{srv: s, sess: sess, stream: stream}
	if err := t.run(ctx, req.GetPrompt()); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	s.tasks.Add(1)
	return nil
}

// task is one Run: its events not yet sent, and those of them the log
// has not yet recorded.
type task struct {
	srv     *Server
	sess    *session
	stream  penguinv1.EngineService_RunServer
	pending []*penguinv1.RunEvent
	// unrecorded are the pending events the log keeps, which wait for
	// the next commit; held is set while there are any, and every event
	// after them waits too, so a client sees nothing the log has not
	// recorded and everything in order, as Penguin's clients do.
	unrecorded []Event
	held       bool
}

// emit numbers an event and sends it, or holds it behind events still to
// be recorded; kind names the log's event kind, empty for those the log
// does not keep.
func (t *task) emit(kind string, ev *penguinv1.RunEvent) error {
	t.sess.seq++
	ev.Sequence = t.sess.seq
	if kind != "" {
		payload, err := proto.Marshal(ev.GetMessage())
		if err != nil {
			return err
		}
		t.unrecorded = append(t.unrecorded, Event{Seq: ev.Sequence, Kind: kind, Payload: payload})
		t.held = true
	}
	t.pending = append(t.pending, ev)
	if t.held {
		return nil
	}
	return t.flush()
}

func (t *task) message(kind string, m *penguinv1.OmniMessage) error {
	m.Timestamp = timestamppb.Now()
	return t.emit(kind, &penguinv1.RunEvent{Event: &penguinv1.RunEvent_Message{Message: m}})
}

func (t *task) state(st penguinv1.SessionState, stop penguinv1.StopReason) error {
	return t.emit("", &penguinv1.RunEvent{Event: &penguinv1.RunEvent_State{State: &penguinv1.RunStateChange{State: st, Status: stop}}})
}

// commit records the events held and writes in one transaction, then
// sends what waited for it.
func (t *task) commit(ctx context.Context, writes ...Write) error {
	if t.srv.store != nil {
		if err := t.srv.store.Commit(ctx, t.sess.id, t.unrecorded, writes...); err != nil {
			return fmt.Errorf("record the log: %w", err)
		}
	}
	t.unrecorded, t.held = t.unrecorded[:0], false
	return t.flush()
}

func (t *task) flush() error {
	for _, ev := range t.pending {
		if err := t.stream.Send(&penguinv1.RunResponse{Event: ev}); err != nil {
			return err
		}
	}
	t.pending = t.pending[:0]
	return nil
}

func (t *task) run(ctx context.Context, prompt string) error {
	s, id := t.srv, t.sess.id
	if err := t.state(penguinv1.SessionState_SESSION_STATE_RUNNING, 0); err != nil {
		return err
	}
	if err := t.message("text", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_USER, Text: prompt}}}); err != nil {
		return err
	}
	if err := t.message("tool_list_ready", proto.Clone(s.toolList).(*penguinv1.OmniMessage)); err != nil {
		return err
	}
	// The lease is taken in the prompt's commit, as Penguin's task takes
	// it (store.SessionWrite.Claim).
	if err := t.commit(ctx, Write{Query: sqlLease, Args: []any{id, time.Now().Add(leaseFor).UnixMicro()}},
		Write{Query: sqlTitle, Args: []any{title(prompt), id}}); err != nil {
		return err
	}

	// The first turn: the model asks for the file.
	first, err := t.model(ctx, s.requestBody(nil))
	if err != nil {
		return err
	}
	if len(first.calls) != 1 || first.calls[0].name != "read_file" {
		return fmt.Errorf("the first turn asked for %d tool calls (%+v); the floor runs one read_file", len(first.calls), first.calls)
	}
	call := first.calls[0]
	if err := t.message("approval_decision", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ApprovalDecision{ApprovalDecision: &penguinv1.ApprovalDecision{
		Decision: penguinv1.Decision_DECISION_ALLOW, ToolCallId: call.id}}}); err != nil {
		return err
	}
	if err := t.commit(ctx, Write{Query: sqlBind, Args: []any{"floor-" + id, "in-process", id}}); err != nil {
		return err
	}

	// The read.
	output, err := t.read(call)
	if err != nil {
		return err
	}
	if err := t.message("tool_call_output", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCallOutput{ToolCallOutput: &penguinv1.ToolCallOutput{
		Role: penguinv1.Role_ROLE_USER, Output: output, ToolCallId: call.id}}}); err != nil {
		return err
	}

	// The second turn: the answer.
	body := s.requestBody(&followUp{call: call, output: output})
	second, err := t.model(ctx, body, func() error { return t.commit(ctx) })
	if err != nil {
		return err
	}
	if len(second.calls) != 0 || second.text == "" {
		return fmt.Errorf("the second turn did not answer (%d tool calls)", len(second.calls))
	}
	if err := t.commit(ctx,
		Write{Query: sqlUsage, Args: []any{t.sess.usage.GetOutput(), t.sess.usage.GetTotal(), id}},
		Write{Query: sqlRelease, Args: []any{id}}); err != nil {
		return err
	}
	return t.state(penguinv1.SessionState_SESSION_STATE_IDLE, penguinv1.StopReason_STOP_REASON_COMPLETED)
}

// title is the row's title: the prompt's first line, cut at 80 bytes.
func title(prompt string) string {
	line, _, _ := strings.Cut(prompt, "\n")
	if len(line) > 80 {
		line = line[:80]
	}
	return line
}

// read runs read_file: the file beneath the workspace, opened as an
// os.Root so nothing outside it is reachable, with its lines numbered as
// Penguin's read_file numbers them.
func (t *task) read(call toolCall) (string, error) {
	var args struct {
		FilePath string `json:"file_path"`
	}
	if err := json.Unmarshal([]byte(call.args), &args); err != nil || args.FilePath == "" {
		return "", fmt.Errorf("read_file arguments %q: %v", call.args, err)
	}
	root, err := os.OpenRoot(t.sess.workspace)
	if err != nil {
		return "", err
	}
	data, err := root.ReadFile(args.FilePath)
	_ = root.Close()
	if err != nil {
		return "", err
	}
	t.srv.rds.Add(1)
	out := NumberLines(string(data))
	start := &penguinv1.PartialToolCallOutput{Role: penguinv1.Role_ROLE_USER, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, ToolCallId: call.id}
	delta := &penguinv1.PartialToolCallOutput{Role: penguinv1.Role_ROLE_USER, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, Output: out, ToolCallId: call.id}
	stop := &penguinv1.PartialToolCallOutput{Role: penguinv1.Role_ROLE_USER, EventType: penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, ToolCallId: call.id}
	for _, p := range []*penguinv1.PartialToolCallOutput{start, delta, stop} {
		if err := t.message("", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_PartialToolCallOutput{PartialToolCallOutput: p}}); err != nil {
			return "", err
		}
	}
	return out, nil
}

// NumberLines numbers a file's lines as Penguin's read_file does: the
// line's number right-aligned in six columns, a tab, the line.
func NumberLines(text string) string {
	var b strings.Builder
	n := 0
	for line := range strings.Lines(text) {
		n++
		num := strconv.Itoa(n)
		for range 6 - len(num) {
			b.WriteByte(' ')
		}
		b.WriteString(num)
		b.WriteByte('\t')
		b.WriteString(line)
	}
	return b.String()
}

// toolCall is a tool call the model streamed.
type toolCall struct{ id, name, args string }

// answer is what one model call streamed back.
type answer struct {
	text  string
	calls []toolCall
}

// followUp is what the second request adds to the first: the model's
// tool call and its output.
type followUp struct {
	call   toolCall
	output string
}

// SplitRequest splits a first request's body where its messages end,
// before `],"stream":`, which Penguin writes once, after the messages.
func SplitRequest(body []byte) (head, tail []byte, err error) {
	const end = `],"stream":`
	i := bytes.Index(body, []byte(end))
	if i < 0 || bytes.Count(body, []byte(end)) != 1 || !bytes.HasPrefix(body, []byte(`{"model":`)) {
		return nil, nil, errors.New("plan: the first request's body is not a chat completion request with one end of its messages")
	}
	return body[:i], body[i:], nil
}

// requestBody is the first request's body, or the second's with f's
// tool call and output: the same bytes as Penguin sends
// (TestNextRequest checks them against a recorded pair).
func (s *Server) requestBody(f *followUp) []byte {
	if f == nil {
		return append(append(make([]byte, 0, len(s.head)+len(s.tail)), s.head...), s.tail...)
	}
	return NextRequest(s.head, s.tail, f.call.id, f.call.name, f.call.args, f.output)
}

// NextRequest is the second request's body: the first's messages, the
// assistant's tool call and the tool's output, the rest of the first.
func NextRequest(head, tail []byte, id, name, args, output string) []byte {
	b := make([]byte, 0, len(head)+len(tail)+256+len(output))
	b = append(b, head...)
	b = append(b, `,{"role":"assistant","tool_calls":[{"id":`...)
	b = appendString(b, id)
	b = append(b, `,"type":"function","function":{"name":`...)
	b = appendString(b, name)
	b = append(b, `,"arguments":`...)
	b = appendString(b, args)
	b = append(b, `}}]},{"role":"tool","content":`...)
	b = appendString(b, output)
	b = append(b, `,"tool_call_id":`...)
	b = appendString(b, id)
	b = append(b, '}')
	return append(b, tail...)
}

// appendString appends s as a JSON string, escaped as encoding/json
// escapes it (with HTML's characters), as Penguin's request bodies are.
func appendString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always encodes
	return append(b, q...)
}

// model makes one streamed model call: request_begin, the partials as
// the chunks arrive, then the complete messages, the usage and
// request_end. afterBegin, when given, runs once request_begin is
// emitted (the second request's start goes in the tool output's commit).
func (t *task) model(ctx context.Context, body []byte, afterBegin ...func() error) (*answer, error) {
	if err := t.message("request_begin", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestBegin{RequestBegin: &penguinv1.RequestBegin{}}}); err != nil {
		return nil, err
	}
	for _, f := range afterBegin {
		if err := f(); err != nil {
			return nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.srv.modelURL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Authorization", "Bearer unused")
	resp, err := t.srv.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return nil, fmt.Errorf("model: %s: %s", resp.Status, msg)
	}
	t.srv.calls.Add(1)
	a := &answer{}
	var text strings.Builder
	var call *toolCall
	var args strings.Builder
	var usage *Usage
	var started, finished bool
	err = ReadStream(resp.Body, func(c *Chunk) error {
		if c.Usage != nil {
			usage = c.Usage
		}
		for _, ch := range c.Choices {
			if d := ch.Delta.Content; d != "" {
				if !started {
					started = true
					if err := t.partialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, ""); err != nil {
						return err
					}
				}
				text.WriteString(d)
				if err := t.partialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, d); err != nil {
					return err
				}
			}
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index != 0 {
					return fmt.Errorf("model: tool call %d; the floor runs one", tc.Index)
				}
				if call == nil {
					call = &toolCall{id: tc.ID, name: tc.Function.Name}
					if err := t.partialCall(call, penguinv1.StreamEventType_STREAM_EVENT_TYPE_START, ""); err != nil {
						return err
					}
				}
				if tc.Function.Arguments != "" {
					args.WriteString(tc.Function.Arguments)
					if err := t.partialCall(call, penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA, tc.Function.Arguments); err != nil {
						return err
					}
				}
			}
			if ch.FinishReason != nil && !finished {
				finished = true
				if started {
					if err := t.partialText(penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, ""); err != nil {
						return err
					}
				}
				if call != nil {
					if err := t.partialCall(call, penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP, ""); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("model: %w", err)
	}
	if !finished || usage == nil {
		return nil, fmt.Errorf("model: the stream ended without a finish reason (%v) or usage (%v)", finished, usage != nil)
	}
	if started {
		a.text = text.String()
		if err := t.message("text", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Role: penguinv1.Role_ROLE_ASSISTANT, Text: a.text}}}); err != nil {
			return nil, err
		}
	}
	if call != nil {
		call.args = args.String()
		a.calls = append(a.calls, *call)
		if err := t.message("tool_call", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolCall{ToolCall: &penguinv1.ToolCall{
			Role: penguinv1.Role_ROLE_ASSISTANT, Name: call.name, Arguments: call.args, ToolCallId: call.id}}}); err != nil {
			return nil, err
		}
	}
	u := &t.sess.usage
	u.Output += usage.CompletionTokens
	u.Total += usage.TotalTokens
	provider, model := t.sess.model.GetProvider(), t.sess.model.GetModelId()
	if err := t.message("token_usage", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_TokenUsage{TokenUsage: &penguinv1.TokenUsage{
		Session: &penguinv1.TokenCounts{Output: u.Output, Total: u.Total},
		Request: &penguinv1.TokenCounts{Output: usage.CompletionTokens, Total: usage.TotalTokens}, Provider: provider, ModelId: model}}}); err != nil {
		return nil, err
	}
	if err := t.message("request_end", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_RequestEnd{RequestEnd: &penguinv1.RequestEnd{Status: penguinv1.StopReason_STOP_REASON_COMPLETED}}}); err != nil {
		return nil, err
	}
	return a, nil
}

func (t *task) partialText(typ penguinv1.StreamEventType, text string) error {
	return t.message("", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_PartialText{PartialText: &penguinv1.PartialText{
		Role: penguinv1.Role_ROLE_ASSISTANT, EventType: typ, Text: text}}})
}

func (t *task) partialCall(c *toolCall, typ penguinv1.StreamEventType, args string) error {
	return t.message("", &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_PartialToolCall{PartialToolCall: &penguinv1.PartialToolCall{
		Role: penguinv1.Role_ROLE_ASSISTANT, EventType: typ, Name: c.name, Arguments: args, ToolCallId: c.id}}})
}

// Chunk is the part of a streamed chat completion chunk the floor reads.
type Chunk struct {
	Choices []struct {
		Delta struct {
			Content   string `json:"content"`
			ToolCalls []struct {
				Index    int    `json:"index"`
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *Usage `json:"usage"`
}

// Usage is a chunk's token counts.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// ReadStream reads a server-sent event stream of chat completion chunks
// to its [DONE], calling f with each chunk.
func ReadStream(r io.Reader, f func(*Chunk) error) error {
	br := bufio.NewReaderSize(r, 4<<10)
	for {
		line, err := br.ReadSlice('\n')
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("the stream ended before [DONE]")
			}
			return err
		}
		data, ok := bytes.CutPrefix(bytes.TrimRight(line, "\r\n"), []byte("data:"))
		if !ok {
			continue // blank lines between events, comments, other fields
		}
		data = bytes.TrimSpace(data)
		if string(data) == "[DONE]" {
			return nil
		}
		var c Chunk
		if err := json.Unmarshal(data, &c); err != nil {
			return fmt.Errorf("chunk %q: %w", data, err)
		}
		if err := f(&c); err != nil {
			return err
		}
	}
}
