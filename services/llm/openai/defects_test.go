package openai_test

import (
	"net/http"
	"strings"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
)

// Defects once seen with real providers, each with the provider traffic that showed it.

// TestContentParts: Mistral's thinking models send delta.content as a list
// of typed parts; thinking parts become thinking, text parts text, and the
// stream completes (it used to fail whole as MALFORMED).
func TestContentParts(t *testing.T) {
	_, a := setup(t, emulator.Turn{Thinking: "Weighing the options.", Text: "Use the second.", ContentParts: true})
	r := llmtest.Run(t, t.Context(), a, request())
	if r.Outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("outcome = %v\n%s", r.Outcome, llmtest.Dump(r.Frames))
	}
	if th := r.Thinking(); len(th) != 1 || th[0].GetThinking() != "Weighing the options." {
		t.Errorf("thinking = %v", th)
	}
	if r.Texts() != "Use the second." {
		t.Errorf("text = %q", r.Texts())
	}
}

// TestErrorAfterCommentLine: an error event after an SSE comment line
// (OpenRouter's ": OPENROUTER PROCESSING") keeps the provider's message
// and class (it used to be MALFORMED "unexpected end of JSON input").
func TestErrorAfterCommentLine(t *testing.T) {
	_, a := setup(t, emulator.Turn{Text: "A long answer that is cut by the upstream.", Fault: &emulator.Fault{
		Kind: emulator.FaultStreamError, After: 3, Comment: "OPENROUTER PROCESSING", Type: "server_error", Message: "Upstream provider overloaded",
	}})
	r := llmtest.Run(t, t.Context(), a, request())
	o := r.Outcome
	if o.GetCode() == penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE || !strings.Contains(o.GetMessage(), "Upstream provider overloaded") {
		t.Fatalf("outcome = %v", o)
	}
	if o.GetStatus() != penguinv1.StopReason_STOP_REASON_TIMEOUT || o.GetCode() != penguinv1.FailureCode_FAILURE_CODE_SERVER {
		t.Errorf("a server error mid-stream is transient: %v", o)
	}
}

// TestBare403IsFailed: a 403 that does not name the credential is failed
// (the engine's ladder retries it), not auth; one that does is auth.
func TestBare403IsFailed(t *testing.T) {
	_, a := setup(t,
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: http.StatusForbidden}},
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: http.StatusForbidden, Body: "<html><head><title>403 Forbidden</title></head><body>nginx</body></html>"}},
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: http.StatusForbidden, Message: "This API key is not allowed to use this model", Type: "permission_error"}},
	)
	for i, want := range []penguinv1.StopReason{penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.StopReason_STOP_REASON_AUTH} {
		o := llmtest.Run(t, t.Context(), a, request()).Outcome
		if o.GetStatus() != want || o.GetHttpStatus() != 403 || o.GetPermanent() {
			t.Errorf("403 #%d = %v, want %v", i+1, o, want)
		}
	}
}

// TestReasoningTokensCountedApart: xAI counts reasoning outside
// completion_tokens (prompt 100 + completion 217 + reasoning 196 = total
// 513); the total is kept as reported and the output includes the
// reasoning (the gateway used to report 317).
func TestReasoningTokensCountedApart(t *testing.T) {
	_, a := setup(t, emulator.Turn{Thinking: "Hmm.", Text: "42.", Usage: emulator.Usage{Input: 100, Output: 413, Reasoning: 196, ReasoningApart: true}})
	u := llmtest.Run(t, t.Context(), a, request()).Usage().GetRequest()
	if u.GetTotal() != 513 || u.GetOutput() != 413 || u.GetReasoning() != 196 || u.GetUnreported() {
		t.Errorf("usage = %v, want total 513, output 413, reasoning 196", u)
	}
	// OpenAI counts them inside completion_tokens: nothing is added.
	_, b := setup(t, emulator.Turn{Text: "42.", Usage: emulator.Usage{Input: 100, Output: 413, Reasoning: 196}})
	u = llmtest.Run(t, t.Context(), b, request()).Usage().GetRequest()
	if u.GetTotal() != 513 || u.GetOutput() != 413 || u.GetReasoning() != 196 {
		t.Errorf("usage = %v, want total 513, output 413, reasoning 196", u)
	}
}

// TestUsageNotReported: a stream without usage reports its counts as
// unknown, not as zeros.
func TestUsageNotReported(t *testing.T) {
	_, a := setup(t, emulator.Turn{Text: "Hi.", NoUsage: true}, emulator.Turn{Text: "Hi.", Usage: emulator.Usage{}})
	if u := llmtest.Run(t, t.Context(), a, request()).Usage().GetRequest(); !u.GetUnreported() || u.GetTotal() != 0 {
		t.Errorf("usage without a report = %v, want unreported", u)
	}
	if u := llmtest.Run(t, t.Context(), a, request()).Usage().GetRequest(); u.GetUnreported() {
		t.Errorf("a reported zero usage = %v, must not be unreported", u)
	}
}

// TestCleanMessages: a null error code leaves no stray " 0" or "null", and
// an HTML error page becomes a short excerpt, not markup.
func TestCleanMessages(t *testing.T) {
	_, a := setup(t,
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 400, Message: "Invalid schema for function 'x'."}},
		emulator.Turn{Fault: &emulator.Fault{Kind: emulator.FaultHTTPError, Status: 502,
			Body: "<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>cloudflare</center></body></html>"}},
		emulator.Turn{Text: "x", Fault: &emulator.Fault{Kind: emulator.FaultStreamError, After: 2, Message: "The server had an error"}},
	)
	o := llmtest.Run(t, t.Context(), a, request()).Outcome
	if m := o.GetMessage(); m != "provider answered 400 Bad Request: Invalid schema for function 'x'. (invalid_request_error)" {
		t.Errorf("message = %q", m)
	}
	o = llmtest.Run(t, t.Context(), a, request()).Outcome
	if m := o.GetMessage(); strings.ContainsAny(m, "<>") || !strings.Contains(m, "502 Bad Gateway") || len(m) > 300 {
		t.Errorf("message = %q", m)
	}
	o = llmtest.Run(t, t.Context(), a, request()).Outcome
	if m := o.GetMessage(); strings.HasSuffix(m, " 0") || strings.Contains(m, "null") || !strings.HasSuffix(m, "The server had an error") {
		t.Errorf("message = %q", m)
	}
}
