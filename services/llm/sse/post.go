package sse

import (
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
)

// maxErrorBody bounds how much of an error response is read.
const maxErrorBody = 64 << 10

// Endpoint is where an adapter posts its streaming requests, and how.
type Endpoint struct {
	// Doer sends the requests (headers of the route added).
	Doer *httpwatch.Doer
	// Header is set on every request (the key, the API version).
	Header http.Header
	// IdleTimeout ends a stream that sends nothing for this long; zero or
	// less turns it off.
	IdleTimeout time.Duration
	// Keyless says the route has no key, so that a credential rejection
	// reads as a missing credential.
	Keyless bool
	// Now is the clock for Retry-After dates.
	Now func() time.Time
	// InBandError reads a JSON body that a server answered with 200
	// instead of a stream; ok false when it is not an error.
	InBandError func(body []byte) (kind, message string, ok bool)
	// Classify, when set, refines an HTTP error (a provider that answers
	// 400 for a bad key, say).
	Classify func(*failure.Error) *failure.Error
}

// Stream is one open event stream: read its Events, then Close it.
type Stream struct {
	// Ctx is the request's context: done when the idle watchdog, the
	// caller or a deadline ends it.
	Ctx context.Context
	// Events reads the response's events.
	Events *Reader
	// Exchange records the response, for the request id and for draining
	// the body of a finished stream.
	Exchange *httpwatch.Exchange

	resp *http.Response
	stop func()
}

// Close ends the request and releases its watchdog and its Events,
// which must not be used after.
func (s *Stream) Close() {
	if s.resp != nil {
		_ = s.resp.Body.Close()
	}
	if s.Events != nil {
		s.Events.Release()
		s.Events = nil
	}
	s.stop()
}

// RequestID is the provider's request id from the response headers.
func (s *Stream) RequestID() string {
	if s.resp == nil {
		return ""
	}
	return failure.RequestID(s.resp.Header)
}

// Post sends body to url as JSON, asking for an event stream, and returns
// the open stream; or, when there is none to read (the connection failed,
// the provider answered an error status, or a body that is not a stream),
// the classified failure, with the stream (closed) for its request id.
// It releases body.
func (e *Endpoint) Post(ctx context.Context, url string, body *Body) (*Stream, *failure.Error) {
	defer body.Release()
	ctx, wd := httpwatch.NewWatchdog(ctx, e.IdleTimeout)
	ex := httpwatch.NewExchange(wd.Touch)
	ctx = httpwatch.With(ctx, ex)
	s := &Stream{Ctx: ctx, Exchange: ex, stop: wd.Stop}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		s.Close()
		fe := failure.New(penguinv1.StopReason_STOP_REASON_FAILED, penguinv1.FailureCode_FAILURE_CODE_INVALID_REQUEST, "build the request: %v", err)
		fe.Permanent = true
		return s, fe
	}
	body.attach(req)
	for k, vs := range e.Header {
		req.Header[k] = vs
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.Doer.Do(req)
	if err != nil {
		// Classified before Close, which ends the context.
		fe := failure.TransportAfter(ctx, err, 0, nil)
		s.Close()
		return s, fe
	}
	s.resp = resp
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer s.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if err != nil && len(data) == 0 {
			return s, failure.TransportAfter(ctx, err, resp.StatusCode, resp.Header)
		}
		fe := failure.Keyless(failure.HTTP(resp.StatusCode, resp.Header, failure.Detail(data), e.now()), e.Keyless)
		if e.Classify != nil {
			fe = e.Classify(fe)
		}
		return s, fe
	}
	if mt := mediaType(resp.Header.Get("Content-Type")); mt != "" && mt != eventStream {
		// A server that answers 200 with a JSON error instead of a stream
		// (some gateways do) still gets its message read.
		defer s.Close()
		data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		if e.InBandError != nil {
			if kind, msg, ok := e.InBandError(data); ok {
				fe := failure.InBand(kind, msg)
				fe.RequestID = failure.RequestID(resp.Header)
				return s, fe
			}
		}
		return s, failure.Malformed(nil, "the provider answered %s instead of an event stream: %s", mt, failure.Detail(data))
	}
	s.Events = NewReader(resp.Body)
	return s, nil
}

// eventStream is the media type of a server-sent event stream.
const eventStream = "text/event-stream"

// mediaType is mime.ParseMediaType's media type of a Content-Type, ""
// when it does not parse. The type every stream is sent with, alone or
// with a charset, is told without parsing: mime.ParseMediaType builds a
// map of the parameters at every response. A stream's parameters are not
// read, and whether they parse or not it is a stream (a Content-Type
// that does not parse reads as none), so only the type is looked at.
func mediaType(contentType string) string {
	if rest, ok := strings.CutPrefix(contentType, eventStream); ok && (rest == "" || rest[0] == ';' || rest[0] == ' ' || rest[0] == '\t') {
		return eventStream
	}
	mt, _, _ := mime.ParseMediaType(contentType)
	return mt
}

func (e *Endpoint) now() time.Time {
	if e.Now == nil {
		return time.Now()
	}
	return e.Now()
}

// OpenAIError reads {"error":{"message","type","code"}}, the error body of
// OpenAI's APIs and of most compatible servers, for Endpoint.InBandError.
func OpenAIError(body []byte) (kind, message string, ok bool) {
	var e struct {
		Error *struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Code    json.RawMessage `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil || e.Error == nil {
		return "", "", false
	}
	return failure.Kind(e.Error.Type, e.Error.Code), e.Error.Message, true
}
