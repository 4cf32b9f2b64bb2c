package emulator_test

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	openai "github.com/sashabaranov/go-openai"

	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// testTimeout bounds every test, so that a stuck stream fails the test
// instead of hanging the run.
const testTimeout = 20 * time.Second

// startServer starts an emulator for script and closes it after the test.
func startServer(t *testing.T, script emulator.Script, opts ...emulator.Option) *emulator.Server {
	t.Helper()
	srv := emulator.NewServer(script, opts...)
	t.Cleanup(srv.Close)
	return srv
}

// headerTap is an http.RoundTripper that remembers the last response's
// status and headers, because neither client library exposes the headers
// of an error answer (Retry-After, request ids).
type headerTap struct {
	base   *http.Transport
	mu     sync.Mutex
	status int
	header http.Header
}

func newHeaderTap(t *testing.T) *headerTap {
	t.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	t.Cleanup(tr.CloseIdleConnections)
	return &headerTap{base: tr}
}

func (h *headerTap) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := h.base.RoundTrip(r)
	if err == nil {
		h.mu.Lock()
		h.status, h.header = resp.StatusCode, resp.Header.Clone()
		h.mu.Unlock()
	}
	return resp, err
}

func (h *headerTap) last() (int, http.Header) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.status, h.header
}

func (h *headerTap) client() *http.Client { return &http.Client{Transport: h} }

// openAIClient returns a go-openai client for srv, as the llm adapter builds
// one: a custom base URL and HTTP client.
func openAIClient(srv *emulator.Server, key string, tap *headerTap) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = srv.URL + "/v1"
	cfg.HTTPClient = tap.client()
	return openai.NewClientWithConfig(cfg)
}

// anthropicClient returns an official SDK client for srv with retries off:
// retrying is the engine's job, and a retry would hide the fault under test.
func anthropicClient(srv *emulator.Server, key string, tap *headerTap) anthropic.Client {
	return anthropic.NewClient(
		option.WithBaseURL(srv.URL),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithHTTPClient(tap.client()),
	)
}

// userTurn is a one-message OpenAI request.
func userTurn(text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:         "gpt-test",
		Messages:      []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
		StreamOptions: &openai.StreamOptions{IncludeUsage: true},
	}
}

// anthropicTurn is a one-message Anthropic request.
func anthropicTurn(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     "claude-test",
		MaxTokens: 1024,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))},
	}
}
