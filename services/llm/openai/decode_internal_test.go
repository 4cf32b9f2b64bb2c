package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"reflect"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/sse"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// TestUnquoteMatchesEncodingJSON checks that the shortcut for plain
// strings decodes exactly what encoding/json decodes: escapes, invalid
// UTF-8 (replaced), multi-byte text and the empty string.
func TestUnquoteMatchesEncodingJSON(t *testing.T) {
	for _, in := range []string{`""`, `"plain"`, `"é 日本 🐧"`, `"a\"b\\c\n\u00e9\ud83d\udc27"`, "\"bad \xff\xfe utf8\"", "\"cut \xe6\x97\"", `"\ud800 lone"`} {
		var want, got string
		wantErr := json.Unmarshal([]byte(in), &want)
		gotErr := unquote([]byte(in), &got)
		if got != want || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("unquote(%q) = %q, %v; encoding/json: %q, %v", in, got, gotErr, want, wantErr)
		}
	}
}

// TestReusedChunkMatchesFresh checks that decoding chunks one after the
// other into the reused chunk gives what a fresh chunk gets: nothing of a
// chunk (a tool call's index or id, a finish_reason, content parts, usage)
// carries over to the next.
func TestReusedChunkMatchesFresh(t *testing.T) {
	chunks := []string{
		`{"choices":[{"index":0,"delta":{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"a"}]}},{"index":1,"delta":{"content":"x"}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{"}},{"index":1,"id":"call_2","function":{"name":"g"}}]}}]}`,
		`{"choices":[{"index":0,"delta":{"tool_calls":[{"function":{"arguments":"}"}}]},"finish_reason":"tool_calls"}]}`,
		`{"choices":[{"index":0,"delta":{"content":"b","reasoning":"r","reasoning_content":"rc"}}],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":1}}}`,
		`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":null},"finish_reason":null}]}`,
		`{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}`,
		`{"error":{"message":"overloaded","type":"server_error","code":529}}`,
		`{"choices":[{"index":0,"delta":{"content":"c"}}]}`,
	}
	var reused chunk
	for _, s := range chunks {
		var fresh chunk
		if err := json.Unmarshal([]byte(s), &fresh); err != nil {
			t.Fatal(err)
		}
		reused.reset()
		if err := json.Unmarshal([]byte(s), &reused); err != nil {
			t.Fatal(err)
		}
		if got, want := normalized(reused), normalized(fresh); !reflect.DeepEqual(got, want) {
			t.Errorf("chunk %s\nreused: %+v\nfresh:  %+v", s, got, want)
		}
	}
}

// normalized is c with empty slices as nil, which the adapter reads
// alike, so that a reused chunk and a fresh one compare.
func normalized(c chunk) chunk {
	if len(c.Choices) == 0 {
		c.Choices = nil
	}
	c.Choices = append([]choice(nil), c.Choices...)
	for i := range c.Choices {
		d := &c.Choices[i].Delta
		if len(d.ToolCalls) == 0 {
			d.ToolCalls = nil
		}
		if len(d.Content.parts) == 0 {
			d.Content.parts = nil
		}
	}
	return c
}

// TestMalformedChunkMessage checks the outcome of a chunk that is not
// JSON: MALFORMED, with the parser's reason, after relaying the text
// before it.
func TestMalformedChunkMessage(t *testing.T) {
	body := "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n" +
		"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x\" \"y\"}}]}\n\n" +
		"data: [DONE]\n\n"
	emitted := 0
	emit := func(*penguinv1.OmniMessage) error {
		emitted++
		return nil
	}
	r := sse.NewReader(bytes.NewReader([]byte(body)))
	defer r.Release()
	out := (&Adapter{}).read(context.Background(), r, translate.New(emit, translate.NewIDs(nil)), &httpwatch.Exchange{})
	if out.GetStatus() != penguinv1.StopReason_STOP_REASON_MALFORMED || out.GetCode() != penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE {
		t.Fatalf("outcome %v", out)
	}
	const want = "the provider sent a chunk that is not valid JSON: invalid character '\"' after object key:value pair"
	if out.GetMessage() != want {
		t.Errorf("message %q, want %q", out.GetMessage(), want)
	}
	if emitted == 0 {
		t.Error("the text before the bad chunk was not relayed")
	}
}
