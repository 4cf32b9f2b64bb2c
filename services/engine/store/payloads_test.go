package store

import (
	"bytes"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// TestSplitSharedRoundTrip checks that a split event decodes, body and
// shared part merged, to the message it was made from, field for field
// and with fields this binary does not know; that the shared part holds
// the large field alone; and that small or other events are not split.
func TestSplitSharedRoundTrip(t *testing.T) {
	prompt := strings.Repeat("You are a careful agent. ", 100)
	meta := &penguinv1.SessionMeta{SessionId: "s1", Provider: "p", ModelId: "m", ModelContextWindow: 9,
		SystemPrompt: prompt, AgentState: "/a", Workspace: "/w", Source: "schedule"}
	// A field of a later version of SessionMeta, unknown to this one.
	meta.ProtoReflect().SetUnknown(protowire.AppendString(protowire.AppendTag(nil, 99, protowire.BytesType), "later"))
	tools := &penguinv1.ToolListReady{}
	for i := range 30 {
		tools.Tools = append(tools.Tools, &penguinv1.ToolDefinition{Name: strings.Repeat("t", i+1), Description: "does things", Parameters: `{"type":"object"}`})
	}
	ts := timestamppb.Now()
	big := []*penguinv1.OmniMessage{
		{Timestamp: ts, Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: meta}},
		{Timestamp: ts, Payload: &penguinv1.OmniMessage_ToolListReady{ToolListReady: tools}},
	}
	for _, m := range big {
		full, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		_, body, shared := splitShared(nil, full)
		if shared == nil {
			t.Fatalf("%s of %d bytes was not split", PayloadKind(m), len(full))
		}
		if len(body)+len(shared) > len(full)+8 {
			t.Fatalf("%s: body %d and shared %d bytes, from %d", PayloadKind(m), len(body), len(shared), len(full))
		}
		if bytes.Contains(body, []byte("careful agent")) || bytes.Contains(body, []byte(`{"type":"object"}`)) {
			t.Fatalf("%s: the body holds the shared part", PayloadKind(m))
		}
		if !bytes.Contains(body, []byte("/w")) && PayloadKind(m) == "session_meta" {
			t.Fatal("the session_meta's body lost the session's own fields")
		}
		got, err := decodeStored(PayloadKind(m), body, true, shared)
		if err != nil {
			t.Fatalf("%s: decode: %v", PayloadKind(m), err)
		}
		if !proto.Equal(got, m) {
			t.Fatalf("%s does not come back whole:\n got %v\nwant %v", PayloadKind(m), got, m)
		}
		// The body alone is an event of the same kind without its part.
		if _, err := decodeStored(PayloadKind(m), body, true, nil); err == nil {
			t.Fatalf("%s: a missing shared part decoded", PayloadKind(m))
		}
	}

	small := []*penguinv1.OmniMessage{
		{Timestamp: ts, Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{SessionId: "s", SystemPrompt: "Be brief."}}},
		{Timestamp: ts, Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Text: prompt}}},
	}
	for _, m := range small {
		full, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		if _, body, shared := splitShared(nil, full); shared != nil || !bytes.Equal(body, full) {
			t.Fatalf("%s of %d bytes was split", PayloadKind(m), len(full))
		}
	}
}

// TestEncodeEventsInOneBuffer checks that the events of a batch, encoded
// one after the other into one pooled buffer, keep their own bytes.
func TestEncodeEventsInOneBuffer(t *testing.T) {
	var events []Event
	for i := range 40 {
		m := &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_Text{Text: &penguinv1.Text{Text: strings.Repeat("x", i*97)}}}
		if i%7 == 3 {
			m = &penguinv1.OmniMessage{Payload: &penguinv1.OmniMessage_SessionMeta{SessionMeta: &penguinv1.SessionMeta{
				SessionId: "s", SystemPrompt: strings.Repeat("p", 600+i)}}}
		}
		events = append(events, Event{Sequence: int64(i + 1), Message: m})
	}
	for range 3 { // the second and third batches reuse the first's buffer
		enc, buf, err := encodeEvents("s", events)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range enc {
			got, err := decodeStored(e.kind, e.payload, e.shared != nil, e.shared)
			if err != nil || !proto.Equal(got, events[i].Message) {
				t.Fatalf("event %d: %v, %v", i, got, err)
			}
		}
		releaseBuffer(buf)
	}
}
