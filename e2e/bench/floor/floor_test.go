package floor_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/penguin-agent/penguin/e2e/bench/floor"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcflow"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// readRequests reads a pair of model requests Penguin sent in a task of
// the benchmark (main at 926baaa): the first, and the second with the
// model's read_file call and its output.
func readRequests(t *testing.T) (first, second []byte) {
	t.Helper()
	first, err1 := os.ReadFile("testdata/request1.json")
	second, err2 := os.ReadFile("testdata/request2.json")
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	return first, second
}

// TestNextRequest checks that the floor's second request is the bytes
// Penguin sends, given the same first request, tool call and output.
func TestNextRequest(t *testing.T) {
	first, second := readRequests(t)
	var req goopenai.ChatCompletionRequest
	if err := json.Unmarshal(second, &req); err != nil {
		t.Fatal(err)
	}
	call := req.Messages[2].ToolCalls[0]
	head, tail, err := floor.SplitRequest(first)
	if err != nil {
		t.Fatal(err)
	}
	if got := floor.NextRequest(head, tail, call.ID, call.Function.Name, call.Function.Arguments, req.Messages[3].Content); string(got) != string(second) {
		t.Errorf("the second request differs from Penguin's:\n%s\nwant\n%s", got, second)
	}
	if got, want := floor.NumberLines("Hello from the benchmark's workspace.\n"), req.Messages[3].Content; got != want {
		t.Errorf("NumberLines = %q, Penguin's read_file gave %q", got, want)
	}
	if _, _, err := floor.SplitRequest(first[:100]); err == nil {
		t.Error("SplitRequest took a request without the end of its messages")
	}
}

// TestTask runs the benchmark's task against a floor server on a
// loopback port, recording in SQLite, with a scripted model in the same
// process, and checks what the benchmark relies on: the events streamed
// in order, the model called twice, the file read, five commits, and the
// log's rows.
func TestTask(t *testing.T) {
	for _, stored := range []bool{true, false} {
		t.Run(map[bool]string{true: "store", false: "no store"}[stored], func(t *testing.T) { testTask(t, stored) })
	}
}

func testTask(t *testing.T, stored bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, _ := readRequests(t)
	const answer = "hello.txt says: hi"
	model := emulator.NewServer(emulator.Script{Turns: []emulator.Turn{
		{ToolCalls: []emulator.ToolCall{{Name: "read_file", Arguments: `{"file_path":"hello.txt"}`}}, Usage: emulator.Usage{Input: 1200, Output: 20}},
		{Text: answer, Usage: emulator.Usage{Input: 1260, Output: 14}},
	}})
	defer model.Close()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "hello.txt"), []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tools, err1 := proto.Marshal(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_ToolListReady{ToolListReady: &penguinv1.ToolListReady{
		Tools: []*penguinv1.ToolDefinition{{Name: "read_file", Description: "Read a file."}}}}})
	meta, err2 := proto.Marshal(&penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{SystemPrompt: "You are default."}}})
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	var store *floor.Store
	db := filepath.Join(t.TempDir(), "floor.db")
	if stored {
		s, err := floor.OpenStore(ctx, db, slog.Default())
		if err != nil {
			t.Fatal(err)
		}
		store = s
	}
	srv, err := floor.New(&floor.Plan{Request: first, ToolList: tools, SessionMeta: meta, Config: []byte{1, 2, 3}}, model.OpenAIBaseURL(), store)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer(grpcflow.ServerOptions()...)
	penguinv1.RegisterEngineServiceServer(g, srv)
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()
	conn, err := grpcclient.New(ln.Addr().String(), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := penguinv1.NewEngineServiceClient(conn)

	sess, err := client.CreateSession(ctx, &penguinv1.CreateSessionRequest{
		Model: &penguinv1.ModelRef{Provider: "bench", ModelId: "bench-model"}, Workspace: ws,
		ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY,
	})
	if err != nil {
		t.Fatal(err)
	}
	id := sess.GetSession().GetSessionId()
	stream, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: id, Prompt: "Read hello.txt and tell me what it says"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var output, text string
	want := int64(2)
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ev := resp.GetEvent()
		if ev.GetSequence() != want {
			t.Fatalf("event %d came as the %dth", ev.GetSequence(), want)
		}
		want++
		if st := ev.GetState(); st != nil {
			kinds = append(kinds, st.GetState().String())
			continue
		}
		m := ev.GetMessage()
		kinds = append(kinds, string(m.ProtoReflect().WhichOneof(m.ProtoReflect().Descriptor().Oneofs().ByName("payload")).Name()))
		if o := m.GetToolCallOutput(); o != nil {
			output = o.GetOutput()
		}
		if x := m.GetText(); x != nil && x.GetRole() == penguinv1.Role_ROLE_ASSISTANT {
			text = x.GetText()
		}
	}
	// The stream's shape as Penguin's (docs/performance.md): the prompt,
	// the tool list, each request with its partials, the output.
	wantKinds := "SESSION_STATE_RUNNING text tool_list_ready request_begin partial_tool_call partial_tool_call partial_tool_call partial_tool_call partial_tool_call partial_tool_call " +
		"tool_call token_usage request_end approval_decision partial_tool_call_output partial_tool_call_output partial_tool_call_output tool_call_output " +
		"request_begin partial_text partial_text partial_text partial_text partial_text text token_usage request_end SESSION_STATE_IDLE"
	if got := strings.Join(kinds, " "); got != wantKinds {
		t.Errorf("events:\n%s\nwant\n%s", got, wantKinds)
	}
	if output != "     1\thi\n" || text != answer {
		t.Errorf("output %q, answer %q", output, text)
	}
	if n := len(model.Requests()); n != 2 {
		t.Errorf("%d model requests, want 2", n)
	}
	bad, err := client.Run(ctx, &penguinv1.RunRequest{SessionId: "session-none", Prompt: "x"})
	if err == nil {
		_, err = bad.Recv()
	}
	if status.Code(err) != codes.NotFound {
		t.Errorf("a Run of an unknown session: %v", err)
	}
	c := srv.Counts()
	wantCommits := int64(floor.CommitsPerTask)
	if !stored {
		wantCommits = 0
	}
	if c != (floor.Counts{Tasks: 1, ModelCalls: 2, Reads: 1, Commits: wantCommits}) {
		t.Errorf("counts %+v", c)
	}
	if !stored {
		return
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}
	rows, err := floor.ReadLog(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if rows.Sessions != 1 || rows.Events != 13 || rows.Leases != 0 || rows.Titled != 1 || rows.Bound != 1 {
		t.Errorf("the log holds %+v, want 1 session, titled and bound, 13 events and no lease", rows)
	}
}
