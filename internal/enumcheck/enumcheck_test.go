package enumcheck_test

import (
	"fmt"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumcheck"
	"github.com/penguin-agent/penguin/internal/omni"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// Check names the path of the first undeclared value, at any depth and in
// lists; declared values, zero included, pass.
func TestCheckNamesTheFieldPath(t *testing.T) {
	for _, c := range []struct {
		name string
		msg  proto.Message
		want string // empty: accepted
	}{
		{"declared values", &penguinv1.RunRequest{ApprovalMode: penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY, ThinkingLevel: penguinv1.ThinkingLevel(0)}, ""},
		{"top level", &penguinv1.RunRequest{ApprovalMode: 42}, "approval_mode: 42 is not a value of penguin.v1.ApprovalMode (want one of APPROVAL_MODE_UNSPECIFIED,"},
		{"in a list of messages", &penguinv1.CreateEnvironmentRequest{Tools: &penguinv1.ToolConfig{Builtin: []*penguinv1.ToolSpec{
			{Name: "read_file", Permission: penguinv1.Permission_PERMISSION_R},
			{Name: "write_file", Permission: 77},
		}}}, "tools.builtin[1].permission: 77 is not a value of penguin.v1.Permission"},
		{"in a map, through a recursive type", &structpb.Struct{Fields: map[string]*structpb.Value{
			"k": structpb.NewListValue(&structpb.ListValue{Values: []*structpb.Value{{Kind: &structpb.Value_NullValue{NullValue: 5}}}}),
		}}, `fields["k"].list_value.values[0].null_value: 5 is not a value of google.protobuf.NullValue`},
		{"in a oneof, in a history", &penguinv1.StreamGenerateRequest{History: []*penguinv1.OmniMessage{
			omni.UserText("hi"), omni.ToolCallOutput("c", "out", 99),
		}}, "history[1].tool_call_output.stop_reason: 99 is not a value of penguin.v1.StopReason"},
		{"a oneof's member set, declared", &penguinv1.StreamGenerateRequest{History: []*penguinv1.OmniMessage{
			omni.ToolCallOutput("c", "out", penguinv1.StopReason_STOP_REASON_COMPLETED),
		}}, ""},
		{"nil message", nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := enumcheck.Check(c.msg)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("Check = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
				t.Fatalf("Check = %v, want %q", err, c.want)
			}
		})
	}
}

// TestCheckAllocatesNothing: a request whose values are all declared is
// walked without spelling out a field path (the history of a model
// request would cost a string per element).
func TestCheckAllocatesNothing(t *testing.T) {
	req := &penguinv1.CreateEnvironmentRequest{Tools: &penguinv1.ToolConfig{}}
	for range 50 {
		req.Tools.Builtin = append(req.Tools.Builtin, &penguinv1.ToolSpec{Name: "read_file", Permission: penguinv1.Permission_PERMISSION_R})
	}
	if err := enumcheck.Check(req); err != nil {
		t.Fatal(err)
	}
	// The one allocation is the protobuf runtime's view of the list.
	if n := testing.AllocsPerRun(100, func() { _ = enumcheck.Check(req) }); n > 1 {
		t.Errorf("Check of a valid request allocates %v times", n)
	}
}

// BenchmarkCheckHistory checks a model request with a history of 60
// messages (text, tool calls and their outputs), as every model turn
// sends.
func BenchmarkCheckHistory(b *testing.B) {
	req := &penguinv1.StreamGenerateRequest{ThinkingLevel: penguinv1.ThinkingLevel_THINKING_LEVEL_LOW}
	for i := range 20 {
		id := fmt.Sprint("call_", i)
		req.History = append(req.History, omni.UserText("read the file"), omni.ToolCall(id, "read_file", `{"path":"a.go"}`),
			omni.ToolCallOutput(id, "package a", penguinv1.StopReason_STOP_REASON_COMPLETED))
	}
	for b.Loop() {
		if err := enumcheck.Check(req); err != nil {
			b.Fatal(err)
		}
	}
}
