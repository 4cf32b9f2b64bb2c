package llm_test

import (
	"slices"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/internal/testkit/metrictest"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
)

// TestFramesHandedOverInProcess calls the service through the in-process
// channel, which hands its frames over without a copy (grpcserver.HandOver),
// and changes every field of every frame as soon as it is received, bytes
// in place, as a caller that owns what it received may. Nothing the
// service keeps may be part of a frame: under -race, the middlewares
// reading a token usage they passed on, or a fidelity payload shared with
// the adapter, would be a race; without it, the metered tokens and the
// second call's frames (the adapters' shared fidelity bytes) would come
// out changed.
func TestFramesHandedOverInProcess(t *testing.T) {
	turn := emulator.Turn{
		Thinking: "Thinking it over.", Signature: "sig-abc", Text: "Here is the plan.",
		ToolCalls: []emulator.ToolCall{{Name: "read_file", Arguments: `{"path":"a.txt"}`}},
		Usage:     emulator.Usage{Input: 50, Output: 30, CacheRead: 10},
	}
	for _, route := range []struct{ provider, model string }{{"emu-openai", "gpt-big"}, {"emu-anthropic", "claude-test"}} {
		t.Run(route.provider, func(t *testing.T) {
			e := start(t, emulator.Script{Turns: []emulator.Turn{turn, turn}}, options{inProcess: true})
			var calls [][]*penguinv1.StreamGenerateResponse
			for range 2 {
				s, err := e.client.StreamGenerate(t.Context(), genRequest(route.provider, route.model))
				if err != nil {
					t.Fatal(err)
				}
				var frames []*penguinv1.StreamGenerateResponse
				for {
					f, err := s.Recv()
					if err != nil {
						break
					}
					frames = append(frames, proto.CloneOf(f))
					vandalize(f.ProtoReflect())
				}
				llmtest.Validate(t, frames)
				calls = append(calls, frames)
			}
			if calls[0][len(calls[0])-1].GetOutcome().GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
				t.Fatalf("outcome:\n%s", llmtest.Dump(calls[0]))
			}
			first, second := comparable(calls[0]), comparable(calls[1])
			if !slices.EqualFunc(first, second, func(a, b *penguinv1.StreamGenerateResponse) bool { return proto.Equal(a, b) }) {
				t.Errorf("the second call's frames differ from the first's:\n%s\n%s", llmtest.Dump(first), llmtest.Dump(second))
			}
			labels := map[string]string{"provider": route.provider, "model": route.model, "kind": "output"}
			if v := metrictest.Get(t, e.metrics, "penguin_llm_tokens_total", labels); v != 2*30 {
				t.Errorf("output tokens metered = %v, want %v", v, 2*30)
			}
		})
	}
}

// vandalize changes every field of m that is set: each string and number,
// each byte of each byte slice in place, each submessage's fields in turn,
// and the cost a token count points to.
func vandalize(m protoreflect.Message) {
	var fields []protoreflect.FieldDescriptor
	m.Range(func(fd protoreflect.FieldDescriptor, _ protoreflect.Value) bool {
		fields = append(fields, fd)
		return true
	})
	for _, fd := range fields {
		v := m.Get(fd)
		switch {
		case fd.IsMap():
		case fd.IsList():
			if fd.Message() != nil {
				for i := range v.List().Len() {
					vandalize(v.List().Get(i).Message())
				}
			}
		case fd.Message() != nil:
			vandalize(v.Message())
		case fd.Kind() == protoreflect.BytesKind:
			b := v.Bytes()
			for i := range b {
				b[i] = '#'
			}
		case fd.Kind() == protoreflect.StringKind:
			m.Set(fd, protoreflect.ValueOfString("vandalized"))
		case fd.Kind() == protoreflect.Int64Kind:
			m.Set(fd, protoreflect.ValueOfInt64(-1))
		case fd.Kind() == protoreflect.Int32Kind:
			m.Set(fd, protoreflect.ValueOfInt32(-1))
		}
	}
	// Setting an optional number through reflection gives it a new
	// pointer; the one it had is written through instead.
	if c, ok := m.Interface().(*penguinv1.TokenCounts); ok && c.CostUsd != nil {
		*c.CostUsd = -1
	}
}
