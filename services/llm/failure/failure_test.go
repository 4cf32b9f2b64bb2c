package failure_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
)

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		header http.Header
		want   time.Duration
	}{
		{http.Header{"Retry-After": {"2"}}, 2 * time.Second},
		{http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{http.Header{"Retry-After": {now.Add(30 * time.Second).Format(http.TimeFormat)}}, 30 * time.Second},
		{http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After": {"-3"}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}, "Retry-After": {"9"}}, 250 * time.Millisecond},
		{nil, 0},
	} {
		if got := failure.RetryAfter(tc.header, now); got != tc.want {
			t.Errorf("RetryAfter(%v) = %v, want %v", tc.header, got, tc.want)
		}
	}
}

func TestHTTP(t *testing.T) {
	h := http.Header{"X-Request-Id": {"req_1"}, "Retry-After": {"4"}}
	for _, tc := range []struct {
		status int
		detail string
		want   penguinv1.StopReason
		code   penguinv1.FailureCode
	}{
		{401, "", penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH},
		// A bare 403 is failed (retried by the engine's ladder); one that
		// names the key is a credential failure.
		{403, "", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_UNKNOWN},
		{403, "Country, region, or territory not supported (invalid_request_error unsupported_country_region_territory)", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_UNKNOWN},
		{403, "an HTML page: 403 Forbidden", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_UNKNOWN},
		{403, "Your API key does not have permission to use the specified resource. (permission_error)", penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH},
		// A key that lacks a permission, in the words OpenAI and Anthropic
		// use, is a credential failure too, whatever else the text says.
		{403, "You have insufficient permissions for this operation. Missing scopes: model.request. (invalid_request_error)", penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH},
		{403, "This organization does not have access to the model. (permission_error)", penguinv1.StopReason_STOP_REASON_AUTH, penguinv1.FailureCode_FAILURE_CODE_AUTH},
		{429, "Rate limit reached", penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT},
		{429, "You exceeded your current quota", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_QUOTA},
		{402, "", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_QUOTA},
		{408, "", penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TIMEOUT},
		{500, "", penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_SERVER},
		{529, "Overloaded", penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_SERVER},
		{400, "This model's maximum context length is 8192 tokens", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED},
		{400, "prompt is too long: 201000 tokens > 200000 maximum", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_CONTEXT_WINDOW_EXCEEDED},
		{400, "Invalid value for 'tools'", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST},
		{404, "model not found", penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST},
	} {
		e := failure.HTTP(tc.status, h, tc.detail, time.Now())
		if e.Status != tc.want || e.Code != tc.code || e.HTTPStatus != tc.status || e.RequestID != "req_1" || e.RetryAfter != 4*time.Second {
			t.Errorf("HTTP(%d, %q) = %+v", tc.status, tc.detail, e)
		}
		o := e.Outcome()
		if o.GetRetryAfterMs() != 4000 || o.GetHttpStatus() != int32(tc.status) || o.GetProviderRequestId() != "req_1" || o.GetMessage() == "" {
			t.Errorf("outcome = %v", o)
		}
	}
	if id := failure.RequestID(http.Header{"Request-Id": {"req_ant"}}); id != "req_ant" {
		t.Errorf("anthropic request id = %q", id)
	}
}

// TestDetail checks that error bodies become short readable messages: no
// stray null or zero code, no markup.
func TestDetail(t *testing.T) {
	for body, want := range map[string]string{
		`{"error":{"message":"bad thing","type":"invalid_request_error","param":null,"code":null}}`: "bad thing (invalid_request_error)",
		`{"error":{"message":"no credits","type":"","code":0}}`:                                     "no credits",
		`{"error":{"message":"slow down","type":"requests","code":"rate_limit_exceeded"}}`:          "slow down (requests rate_limit_exceeded)",
		`{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`:               "Overloaded (overloaded_error)",
		`{"error":{"code":400,"message":"API key not valid.","status":"INVALID_ARGUMENT"}}`:         "API key not valid. (INVALID_ARGUMENT 400)",
		`[{"error":{"code":429,"message":"Resource exhausted","status":"RESOURCE_EXHAUSTED"}}]`:     "Resource exhausted (RESOURCE_EXHAUSTED 429)",
		`{"error":"model not loaded"}`: "model not loaded",
		"<html><head><title>502 Bad Gateway</title><style>b{}</style></head><body><h1>502</h1></body></html>": "an HTML page: 502 Bad Gateway",
		"<!DOCTYPE html><html><body><script>x()</script><p>Access   denied</p></body></html>":                 "an HTML page: Access denied",
		"upstream connect error": "upstream connect error",
	} {
		if got := failure.Detail([]byte(body)); got != want {
			t.Errorf("Detail(%.40q) = %q, want %q", body, got, want)
		}
	}
}

func TestTransportAndCancellation(t *testing.T) {
	live := context.Background()
	for _, tc := range []struct {
		err  error
		want penguinv1.StopReason
		code penguinv1.FailureCode
	}{
		{fmt.Errorf("read: %w", io.ErrUnexpectedEOF), penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TRANSPORT},
		{fmt.Errorf("read: %w", syscall.ECONNRESET), penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TRANSPORT},
		{fmt.Errorf("dial: %w", syscall.ECONNREFUSED), penguinv1.StopReason_STOP_REASON_TIMEOUT, penguinv1.FailureCode_FAILURE_CODE_TRANSPORT},
		{json.Unmarshal([]byte("{"), new(any)), penguinv1.StopReason_STOP_REASON_MALFORMED, penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE},
		{errors.New("something odd"), penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_UNKNOWN},
	} {
		if e := failure.Transport(live, tc.err); e.Status != tc.want || e.Code != tc.code {
			t.Errorf("Transport(%v) = %v %v", tc.err, e.Status, e.Code)
		}
	}

	cancelled, cancel := context.WithCancel(live)
	cancel()
	if e := failure.Transport(cancelled, io.ErrUnexpectedEOF); e.Status != penguinv1.StopReason_STOP_REASON_ABORTED {
		t.Errorf("a cancelled caller = %v", e)
	}
	for cause, want := range map[error]string{failure.ErrRequestTimeout: "request timeout", failure.ErrIdleTimeout: "idle-stream timeout"} {
		ctx, cancel := context.WithCancelCause(live)
		cancel(cause)
		e := failure.Cancelled(ctx)
		if e.Status != penguinv1.StopReason_STOP_REASON_TIMEOUT || e.Code != penguinv1.FailureCode_FAILURE_CODE_TIMEOUT || !errors.Is(e, cause) {
			t.Errorf("cause %v = %v (%s)", cause, e, want)
		}
	}
	injected := failure.New(penguinv1.StopReason_STOP_REASON_MALFORMED, penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, "injected")
	ctx, cancelCause := context.WithCancelCause(live)
	cancelCause(injected)
	if e := failure.Cancelled(ctx); e != injected {
		t.Errorf("an injected cause = %v", e)
	}
	if failure.Cancelled(live) != nil {
		t.Error("a live context is not cancelled")
	}
}

// TestTransportAfter checks that a transport failure carries the request
// id only once the provider answered, and leaves an Error held by err as
// it was.
func TestTransportAfter(t *testing.T) {
	ctx := context.Background()
	h := http.Header{"X-Request-Id": {"req_123"}}
	if e := failure.TransportAfter(ctx, io.ErrUnexpectedEOF, 0, h); e.RequestID != "" || e.Code != penguinv1.FailureCode_FAILURE_CODE_TRANSPORT {
		t.Errorf("before any response = %+v", e)
	}
	if e := failure.TransportAfter(ctx, io.ErrUnexpectedEOF, http.StatusOK, h); e.RequestID != "req_123" || e.Code != penguinv1.FailureCode_FAILURE_CODE_TRANSPORT {
		t.Errorf("after a response = %+v", e)
	}
	held := failure.New(penguinv1.StopReason_STOP_REASON_MALFORMED, penguinv1.FailureCode_FAILURE_CODE_MALFORMED_RESPONSE, "held")
	e := failure.TransportAfter(ctx, fmt.Errorf("read: %w", held), http.StatusOK, h)
	if e.RequestID != "req_123" || e.Code != held.Code || held.RequestID != "" {
		t.Errorf("held error = %+v, returned %+v", held, e)
	}
}

func TestInBand(t *testing.T) {
	for _, tc := range []struct {
		typ, msg string
		want     penguinv1.FailureCode
	}{
		{"overloaded_error", "Overloaded", penguinv1.FailureCode_FAILURE_CODE_SERVER},
		{"api_error", "Internal", penguinv1.FailureCode_FAILURE_CODE_SERVER},
		{"rate_limit_error", "slow down", penguinv1.FailureCode_FAILURE_CODE_RATE_LIMIT},
		{"authentication_error", "bad key", penguinv1.FailureCode_FAILURE_CODE_AUTH},
		{"invalid_request_error", "bad", penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST},
		{"billing_error", "pay up", penguinv1.FailureCode_FAILURE_CODE_QUOTA},
	} {
		if e := failure.InBand(tc.typ, tc.msg); e.Code != tc.want {
			t.Errorf("InBand(%s) = %v", tc.typ, e.Code)
		}
	}
}

func TestWordings(t *testing.T) {
	overflow := []string{
		"This model's maximum context length is 128000 tokens.",
		"context_length_exceeded",
		"Input is too long for the model's context window",
		"prompt is too long: 250000 tokens > 200000 maximum",
		"The input exceeds the model's context length",
	}
	for _, s := range overflow {
		if !failure.IsContextOverflow(s) {
			t.Errorf("IsContextOverflow(%q) = false", s)
		}
	}
	for _, s := range []string{"Rate limit reached for requests", "Invalid value for 'tools'", "max_tokens is too large"} {
		if failure.IsContextOverflow(s) || failure.IsQuota(s) {
			t.Errorf("%q misread as overflow or quota", s)
		}
	}
	for _, s := range []string{"insufficient_quota", "You exceeded your current quota", "Your credit balance is too low", "out of credits"} {
		if !failure.IsQuota(s) {
			t.Errorf("IsQuota(%q) = false", s)
		}
	}
}
