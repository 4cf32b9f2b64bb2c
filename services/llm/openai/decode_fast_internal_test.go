package openai

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// shortWayChunks are chunks as the providers send them, each of which
// chunk.decode must take (not leave to encoding/json): the mockllm's, and
// OpenAI's, DeepSeek's, OpenRouter's and Mistral's kinds, and some odd
// but valid ones.
var shortWayChunks = []string{
	`{"id":"chatcmpl-27e1d9000001","object":"chat.completion.chunk","created":1796662666,"model":"bench-model","system_fingerprint":"fp_emulator","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-27e1d9000001","object":"chat.completion.chunk","created":1796662666,"model":"bench-model","system_fingerprint":"fp_emulator","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_27e1d90000010","type":"function","function":{"name":"read_file","arguments":""}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-27e1d9000001","object":"chat.completion.chunk","created":1796662666,"model":"bench-model","system_fingerprint":"fp_emulator","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"file_p"}}]},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-27e1d9000001","object":"chat.completion.chunk","created":1796662666,"model":"bench-model","system_fingerprint":"fp_emulator","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"tool_calls"}],"usage":null}`,
	`{"id":"chatcmpl-27e1d9000001","object":"chat.completion.chunk","created":1796662666,"model":"bench-model","system_fingerprint":"fp_emulator","choices":[],"usage":{"prompt_tokens":1200,"completion_tokens":20,"total_tokens":1220,"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}}`,
	`{"id":"chatcmpl-27e1d9000002","object":"chat.completion.chunk","created":1796662666,"model":"bench-model","system_fingerprint":"fp_emulator","choices":[{"index":0,"delta":{"content":"'s works"},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"id":"chatcmpl-B9MH","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"content":" \"main.go\" é 日本 🐧\n\t\u00e9\ud83d\udc27 \/ \b\f\r"},"logprobs":{"content":[{"token":"a","logprob":-0.5,"bytes":[97],"top_logprobs":[]}]},"finish_reason":null}]}`,
	`{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"Let me think\u2026"},"finish_reason":null}],"usage":null}`,
	`{"choices":[{"index":0,"delta":{"reasoning":"r","content":""}}],"provider":"OpenAI"}`,
	`{"choices":[{"index":0,"delta":{"reasoning":{"text":"an object"},"content":[{"type":"thinking","thinking":[{"type":"text","text":"hm"}]},{"type":"text","text":"a"}]}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","function":{"name":"f","arguments":"{"}},{"index":1,"id":"call_2","function":{"name":"g"}}]}},{"index":1,"delta":{"content":"x"}}]}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"id":"call_x","function":{"name":"h","arguments":"{}"}},{"function":{"arguments":"}"}}]},"finish_reason":"tool_calls"}]}`,
	`{"choices":[{"index":0,"delta":{"content":null,"tool_calls":null,"reasoning":null,"reasoning_content":null},"finish_reason":null}],"error":null}`,
	`{"choices":[{"index":null,"delta":null}],"usage":{"prompt_tokens":-3,"completion_tokens":9223372036854775807,"total_tokens":-9223372036854775808,"prompt_cache_hit_tokens":7,"prompt_tokens_details":null,"completion_tokens_details":{"reasoning_tokens":5}}}`,
	`{"choices":[{"index":0,"delta":{"tool_calls":[{"index":null,"id":null,"function":null}]}}],"usage":{"prompt_tokens":3,"prompt_tokens_details":{"cached_tokens":1,"cache_write_tokens":2}}}`,
	"\t{ \"choices\" : [ { \"index\" : 0 , \"delta\" : { \"content\" : \"x\" } } ] , \"usage\" : null }\r\n ",
	`{"choices":null,"x":[[[[{"a":[true,false,null,-0.5e+10,0,1E2,"s"]}]]]],"Y":{}}`,
	"{\"choices\":[{\"index\":0,\"delta\":{\"content\":\"bad \xff\xfe utf8 \xe6\x97 cut\"}}]}",
	`{"choices":[{"index":0,"delta":{"content":"\ud800 lone \udc00 \ud83d\u0041 pair? \uDBFF\uDFFF"}}]}`,
	`{}`,
}

// longWayChunks are chunks encoding/json reads in its own way (keys that
// match a field only without regard to case, a key sent twice, numbers
// where an integer goes) or refuses: chunk.decode must decode them as
// encoding/json does, or leave them to it.
var longWayChunks = []string{
	`{"error":{"message":"overloaded","type":"server_error","code":529}}`,
	`{"Choices":[]}`, `{"choices":[{"Index":1}]}`, `{"choices":[{"delta":{"CONTENT":"x"}}]}`, `{"usage":{"Prompt_Tokens":1}}`,
	`{"ch\u006fices":[]}`, `{"choicés":[]}`, `{"\u212aey":1}`,
	`{"choices":[],"choices":[]}`, `{"choices":[{"delta":{},"delta":{}}]}`, `{"usage":null,"usage":null}`,
	`{"choices":[{"index":1.0}]}`, `{"choices":[{"index":1e2}]}`, `{"choices":[{"index":"1"}]}`,
	`{"usage":{"prompt_tokens":9223372036854775808}}`, `{"usage":{"prompt_tokens":-9223372036854775809}}`,
	`{"choices":[{"finish_reason":5}]}`, `{"choices":[{"delta":{"reasoning_content":5}}]}`, `{"choices":[{"delta":{"tool_calls":{}}}]}`,
	`{"choices":{}}`, `{"choices":[1]}`, `{"choices":[null]}`, `{"choices":[{"delta":{"tool_calls":[null]}}]}`, `{"choices":[{"delta":[]}]}`,
	`null`, `[]`, `"x"`, `1`, ``, ` `,
	`{"x":` + strings.Repeat("[", 100) + strings.Repeat("]", 100) + `}`,
	`{} x`, `{}{}`, `{"a":1,}`, `{"a":[1,]}`, `{"a":01}`, `{"a":-}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":nul}`, `{"a":True}`,
	`{"a":"\x"}`, `{"a":"\u12G4"}`, "{\"a\":\"tab\there\"}", `{"a":"\'"}`, `{'a':1}`, `{"a" 1}`, `{"a":1 "b":2}`,
}

// checkDecode fails t if chunk.decode, into a chunk that held another
// chunk before, takes data differently from encoding/json into a fresh
// one: accepts what encoding/json refuses, or decodes something else.
func checkDecode(t *testing.T, data []byte) (took bool) {
	t.Helper()
	var want chunk
	wantErr := json.Unmarshal(data, &want)
	var got chunk
	if err := json.Unmarshal([]byte(shortWayChunks[11]), &got); err != nil {
		t.Fatal(err)
	}
	got.reset()
	if !got.decode(data) {
		return false
	}
	if wantErr != nil {
		t.Errorf("decode took %q, which encoding/json refuses: %v", data, wantErr)
		return true
	}
	if g, w := normalized(got), normalized(want); !reflect.DeepEqual(g, w) {
		t.Errorf("decode(%q)\n got %+v\nwant %+v", data, g, w)
	}
	return true
}

// TestChunkDecodeMatchesEncodingJSON checks the chunk decoder against
// encoding/json on the providers' chunks (which it must take), on chunks
// encoding/json reads in its own way or refuses, and on each of the providers' chunks with each byte in
// turn cut, dropped or replaced by one that matters to JSON's grammar
// (FuzzChunkDecode goes on from there).
func TestChunkDecodeMatchesEncodingJSON(t *testing.T) {
	for _, s := range shortWayChunks {
		if !checkDecode(t, []byte(s)) {
			t.Errorf("decode left %s to encoding/json", s)
		}
	}
	for _, s := range longWayChunks {
		checkDecode(t, []byte(s))
	}
	replacements := []byte{'"', '\\', ',', ':', '}', ']', '\n', 'x', 'u', '0', '.', 0x1f, 0xff}
	for _, s := range shortWayChunks {
		for i := range len(s) {
			checkDecode(t, []byte(s[:i]))
			checkDecode(t, []byte(s[:i]+s[i+1:]))
			for _, r := range replacements {
				b := []byte(s)
				b[i] = r
				checkDecode(t, b)
			}
		}
	}
}

// FuzzChunkDecode runs checkDecode on mutations of the chunks above.
func FuzzChunkDecode(f *testing.F) {
	for _, s := range append(shortWayChunks, longWayChunks...) {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) { checkDecode(t, data) })
}
