package openai

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	goopenai "github.com/sashabaranov/go-openai"
)

// reasoningFields holds, by index into a request's messages, the text of
// each assistant message's "reasoning" field. go-openai's
// ChatCompletionMessage has a field for reasoning_content but none for
// reasoning, and go-openai marshals the request body itself with
// encoding/json, with no hook for extra message fields; so the fields ride
// in the request's context to [bodyHook], which adds them to the body on
// its way out.
type reasoningFields map[int]string

type reasoningFieldsKey struct{}

// withReasoningFields returns ctx carrying f for [bodyHook]; with no fields
// it returns ctx itself, and the body goes out exactly as go-openai wrote
// it.
func withReasoningFields(ctx context.Context, f reasoningFields) context.Context {
	if len(f) == 0 {
		return ctx
	}
	return context.WithValue(ctx, reasoningFieldsKey{}, f)
}

// bodyHook is the HTTP client go-openai sends through: it adds the
// [reasoningFields] of the request's context to the JSON body and hands the
// request on. A request whose context has none passes untouched.
type bodyHook struct{ next goopenai.HTTPDoer }

// Do rewrites req's body when its context carries reasoning fields, then
// sends it. A body it cannot rewrite fails the request before anything is
// sent, which the adapter reports as a request refused before sending.
func (h bodyHook) Do(req *http.Request) (*http.Response, error) {
	f, _ := req.Context().Value(reasoningFieldsKey{}).(reasoningFields)
	if len(f) == 0 || req.Body == nil {
		return h.next.Do(req)
	}
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err == nil {
		body, err = f.apply(body)
	}
	if err != nil {
		return nil, fmt.Errorf("openai: adding the reasoning fields to the request body: %w", err)
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	req.ContentLength = int64(len(body))
	req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	return h.next.Do(req)
}

// apply returns the Chat Completions body with f's messages given their
// "reasoning" field. Every other value keeps go-openai's bytes: only the
// listed messages are decoded and encoded again.
func (f reasoningFields) apply(body []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(top["messages"], &msgs); err != nil {
		return nil, fmt.Errorf("messages: %w", err)
	}
	for i, text := range f {
		if i < 0 || i >= len(msgs) {
			return nil, fmt.Errorf("message %d of %d does not exist", i, len(msgs))
		}
		var m map[string]json.RawMessage
		if err := json.Unmarshal(msgs[i], &m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		var err error
		if m[fieldReasoning], err = json.Marshal(text); err != nil {
			return nil, err
		}
		if msgs[i], err = json.Marshal(m); err != nil {
			return nil, err
		}
	}
	var err error
	if top["messages"], err = json.Marshal(msgs); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}
