package emulator

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/logger"
)

// DefaultMaxBodyBytes bounds a request body; base64 images make bodies big,
// so the bound is generous.
const DefaultMaxBodyBytes = 64 << 20

// Option configures a [Server].
type Option func(*options)

type options struct {
	apiKey  string
	logger  *slog.Logger
	record  bool
	maxBody int64
}

// WithAPIKey makes the server reject requests that do not carry key (OpenAI:
// "Authorization: Bearer KEY"; Anthropic: "x-api-key: KEY" or the bearer
// header) with a 401 in the provider's error format.
func WithAPIKey(key string) Option { return func(o *options) { o.apiKey = key } }

// WithLogger logs one line per request (never a key or a body); without
// it, or with nil, nothing is logged.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.logger = l } }

// WithoutRecording stops the server from keeping requests, for load tests
// whose requests nobody inspects.
func WithoutRecording() Option { return func(o *options) { o.record = false } }

// WithMaxBodyBytes bounds request bodies (DefaultMaxBodyBytes by default);
// a larger body gets 413.
func WithMaxBodyBytes(n int64) Option { return func(o *options) { o.maxBody = n } }

// Request is one request the server received, as the client sent it.
type Request struct {
	// Seq numbers requests from 1 in order of arrival.
	Seq int
	// Time is when the request arrived.
	Time time.Time
	// Method and Path are the request line's.
	Method string
	Path   string
	// Header is a copy of the request headers.
	Header http.Header
	// RawBody is the body as sent.
	RawBody []byte
	// Body is RawBody parsed as a JSON object; nil when it is not one.
	Body map[string]any
	// Provider is "openai" or "anthropic" by the wire format of the path;
	// empty for other paths.
	Provider string
	// Imitates is the catalog provider the path imitates ("deepseek" for
	// /deepseek/chat/completions); empty for the plain routes.
	Imitates string
	// Turn is the index in Script.Turns of the turn played, or -1 when the
	// request was refused before one was picked.
	Turn int
	// Status is the HTTP status the emulator answered with (200 for a
	// played stream, even when a fault broke it later).
	Status int
	// RequestID is the provider request id the emulator returned.
	RequestID string
}

// record is a recorded request before its body is parsed: parsing happens
// only when a test asks, to keep the request path cheap.
type record struct {
	imitates  string
	seq       int
	at        time.Time
	method    string
	path      string
	header    http.Header
	body      []byte
	provider  string
	turn      int
	status    int
	requestID string
}

// compiledTurn is a turn prepared once for every request that plays it.
type compiledTurn struct {
	index  int
	turn   *Turn
	blocks []Block
	tools  int // number of tool_call blocks
	chunk  int
}

// Server is the provider emulator. Create it with [New] or [NewServer].
type Server struct {
	// URL is the base URL once the server listens (for example
	// "http://127.0.0.1:41234"): the OpenAI base URL is URL+"/v1" and the
	// Anthropic base URL is URL itself.
	URL string

	script   Script
	catalog  *catalog.Catalog
	turns    []compiledTurn
	invalid  error
	matchers bool
	opts     options
	idPrefix string
	ids      atomic.Uint64
	log      *slog.Logger

	mu        sync.Mutex
	used      []bool
	seq       int
	records   []record
	changed   chan struct{}
	closed    bool
	active    sync.WaitGroup
	httpSrv   *http.Server
	started   bool
	serveDone chan struct{} // closed when the serve goroutine returns
	serveErr  error         // what it returned; read after serveDone

	done      chan struct{}
	closeOnce sync.Once
}

// New returns a server for script that does not listen yet: mount
// [Server.Handler] in-process, or call [Server.Start]. An invalid script is
// reported by Start and by every request.
func New(script Script, opts ...Option) *Server {
	o := options{record: true, maxBody: DefaultMaxBodyBytes}
	for _, opt := range opts {
		opt(&o)
	}
	s := &Server{
		catalog: catalog.Builtin(),
		script:  script,
		invalid: script.Validate(),
		opts:    o,
		used:    make([]bool, len(script.Turns)),
		changed: make(chan struct{}),
		done:    make(chan struct{}),
		log:     o.logger,
	}
	s.log = logger.OrDiscard(s.log)
	var raw [6]byte
	_, _ = rand.Read(raw[:])
	s.idPrefix = hex.EncodeToString(raw[:])
	// Own copies of the turns, so that a caller changing its script later
	// cannot race with requests.
	s.script.Turns = slices.Clone(script.Turns)
	for i := range s.script.Turns {
		if f := s.script.Turns[i].Fault; f != nil {
			fc := *f
			s.script.Turns[i].Fault = &fc
		}
	}
	s.turns = make([]compiledTurn, len(script.Turns))
	for i := range script.Turns {
		t := &s.script.Turns[i]
		blocks := t.blocks()
		tools := 0
		for _, b := range blocks {
			if b.Type == BlockToolCall {
				tools++
			}
		}
		chunk := t.ChunkSize
		if chunk <= 0 {
			chunk = DefaultChunkSize
		}
		s.turns[i] = compiledTurn{index: i, turn: t, blocks: blocks, tools: tools, chunk: chunk}
		if t.Match != "" {
			s.matchers = true
		}
	}
	return s
}

// NewServer returns a server for script listening on 127.0.0.1 at a free
// port. Like httptest.NewServer it panics when it cannot listen, and also
// when the script is invalid: both are mistakes in the test itself.
func NewServer(script Script, opts ...Option) *Server {
	s := New(script, opts...)
	if err := s.Start(); err != nil {
		panic(err)
	}
	return s
}

// Start listens on the configured address and serves in the background
// until [Server.Close].
func (s *Server) Start() error {
	if s.invalid != nil {
		return s.invalid
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("emulator: listen: %w", err)
	}
	return s.serveBackground(ln)
}

func (s *Server) serveBackground(ln net.Listener) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		_ = ln.Close()
		return errors.New("emulator: server already started or closed")
	}
	s.started = true
	s.httpSrv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	s.serveDone = make(chan struct{})
	s.URL = "http://" + ln.Addr().String()
	srv, done := s.httpSrv, s.serveDone
	s.mu.Unlock()
	go func() {
		s.serveErr = srv.Serve(ln)
		close(done)
	}()
	return nil
}

// Serve serves on ln until ctx ends, then stops: open streams are ended,
// the server drains for up to drain and then closes what is left. It is
// what the mockllm command runs.
func (s *Server) Serve(ctx context.Context, ln net.Listener, drain time.Duration) error {
	if s.invalid != nil {
		_ = ln.Close()
		return s.invalid
	}
	if err := s.serveBackground(ln); err != nil {
		return err
	}
	select {
	case <-s.serveDone:
		s.Close()
		return fmt.Errorf("emulator: serve: %w", s.serveErr)
	case <-ctx.Done():
	}
	s.closeOnce.Do(func() { close(s.done) })
	sctx, cancel := context.WithTimeout(context.Background(), drain)
	defer cancel()
	err := s.httpSrv.Shutdown(sctx)
	s.Close()
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("emulator: shutdown: %w", err)
	}
	return nil
}

// Close stops the server: it ends stalled and paced streams, closes every
// connection and waits for the handlers to return. It is safe to call more
// than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done) })
	s.mu.Lock()
	s.closed = true
	srv, served := s.httpSrv, s.serveDone
	s.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
		<-served
	}
	s.active.Wait()
}

// OpenAIBaseURL is the base URL an OpenAI client takes: URL+"/v1".
func (s *Server) OpenAIBaseURL() string { return s.URL + "/v1" }

// Handler returns the emulator as an http.Handler, to mount in-process.
func (s *Server) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// Requests returns every request received so far, in order, with bodies
// parsed afresh (callers may change them freely).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	recs := make([]record, len(s.records))
	copy(recs, s.records)
	s.mu.Unlock()
	out := make([]Request, len(recs))
	for i, r := range recs {
		out[i] = Request{
			Seq: r.seq, Time: r.at, Method: r.method, Path: r.path,
			Header: r.header.Clone(), RawBody: r.body, Provider: r.provider, Imitates: r.imitates,
			Turn: r.turn, Status: r.status, RequestID: r.requestID,
		}
		var body map[string]any
		if json.Unmarshal(r.body, &body) == nil {
			out[i].Body = body
		}
	}
	return out
}

// WaitRequests waits until at least n requests were recorded and returns
// them, or returns ctx's error. With [WithoutRecording] nothing is recorded,
// so it waits until ctx ends.
func (s *Server) WaitRequests(ctx context.Context, n int) ([]Request, error) {
	for {
		s.mu.Lock()
		have, ch := len(s.records), s.changed
		s.mu.Unlock()
		if have >= n {
			return s.Requests(), nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, fmt.Errorf("emulator: %d of %d requests arrived: %w", have, n, ctx.Err())
		}
	}
}

// Remaining returns how many turns have not been played yet.
func (s *Server) Remaining() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, u := range s.used {
		if !u {
			n++
		}
	}
	return n
}

// protocol is one provider's wire format.
type protocol interface {
	faultFramer
	name() string
	// authorized reports whether r carries key.
	authorized(r *http.Request, key string) bool
	// checkHeaders validates the headers the provider requires.
	checkHeaders(r *http.Request) *apiError
	// parse validates a request body; a failure is the provider's 400.
	parse(body []byte, wantText bool) (callInfo, *apiError)
	// validate applies the protocol and model rules of the route.
	validate(body []byte, rt route) *apiError
	// catalogID is the catalog provider the plain route imitates.
	catalogID() string
	// writeError answers e in the provider's format.
	writeError(w http.ResponseWriter, requestID string, e *apiError)
	// errorFor fills in a scripted HTTP fault's provider defaults.
	errorFor(f *Fault) *apiError
	// stream plays a turn as SSE.
	stream(sw *sseWriter, c *call) error
	// respond plays a turn as one JSON body.
	respond(w http.ResponseWriter, c *call) error
}

// callInfo is what the emulator needs from a request body.
type callInfo struct {
	model        string
	stream       bool
	includeUsage bool
	lastText     string
}

// call is one request being answered.
type call struct {
	callInfo
	turn      *compiledTurn
	requestID string
	created   int64
	idSuffix  string // unique per request, for made-up ids
}

// toolID returns the id of the n-th tool call block b.
func (c *call) toolID(prefix string, b *Block, n int) string {
	if b.ID != "" {
		return b.ID
	}
	return prefix + c.idSuffix + strconv.Itoa(n)
}

// apiError is an error answer before any streaming.
type apiError struct {
	status     int
	typ        string
	param      string
	code       string
	message    string
	body       string // verbatim body, when scripted
	retryAfter string
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		http.Error(w, "emulator: server closed", http.StatusServiceUnavailable)
		return
	}
	s.active.Add(1)
	s.mu.Unlock()
	defer s.active.Done()

	n := s.ids.Add(1)
	requestID := "req_" + s.idPrefix + fmt.Sprintf("%012x", n)
	var proto protocol
	rt, rest := s.routeOf(r.URL.Path)
	switch rest {
	case "/v1/chat/completions", "/chat/completions":
		proto = openAI{}
		w.Header().Set("x-request-id", requestID)
	case "/v1/messages":
		proto = anthropic{}
		w.Header().Set("request-id", requestID)
	case "/v1/responses", "/responses":
		proto = responsesAPI{}
		w.Header().Set("x-request-id", requestID)
	default:
		if m := geminiPath().FindStringSubmatch(rest); m != nil {
			proto = geminiAPI{model: m[1], streaming: m[2] == "streamGenerateContent"}
			w.Header().Set("x-request-id", requestID)
			break
		}
		body, _ := io.ReadAll(io.LimitReader(r.Body, s.opts.maxBody))
		s.record(r, body, "", -1, http.StatusNotFound, requestID, "")
		openAI{}.writeError(w, requestID, &apiError{status: http.StatusNotFound, typ: "invalid_request_error",
			message: fmt.Sprintf("emulator: no route for %s %s; it serves POST /v1/chat/completions, /v1/responses, /v1/messages and /v1beta/models/MODEL:streamGenerateContent", r.Method, r.URL.Path)})
		return
	}
	if rt.provider == nil {
		rt.provider = s.catalog.Provider(proto.catalogID())
	}
	imitates := ""
	if rt.strict {
		imitates = rt.provider.ID
	}
	fail := func(body []byte, turn int, e *apiError) {
		s.record(r, body, proto.name(), turn, e.status, requestID, imitates)
		s.log.Info("emulator request refused", "provider", proto.name(), "path", r.URL.Path, "status", e.status, "request_id", requestID, "reason", e.message)
		proto.writeError(w, requestID, e)
	}
	if r.Method != http.MethodPost {
		fail(nil, -1, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", message: "method " + r.Method + " not allowed; use POST"})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			fail(nil, -1, &apiError{status: http.StatusRequestEntityTooLarge, typ: "request_too_large", message: fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit)})
			return
		}
		fail(nil, -1, &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", message: "reading request body: " + err.Error()})
		return
	}
	if s.opts.apiKey != "" && !proto.authorized(r, s.opts.apiKey) {
		fail(body, -1, proto.errorFor(&Fault{Kind: FaultAuth}))
		return
	}
	if perr := proto.checkHeaders(r); perr != nil {
		fail(body, -1, perr)
		return
	}
	if s.invalid != nil {
		fail(body, -1, &apiError{status: http.StatusInternalServerError, typ: "api_error", code: "invalid_script", message: s.invalid.Error()})
		return
	}
	info, perr := proto.parse(body, s.matchers)
	if perr == nil {
		perr = proto.validate(body, rt)
	}
	if perr != nil {
		fail(body, -1, perr)
		return
	}
	turn, perr := s.pick(info.lastText)
	if perr != nil {
		fail(body, -1, perr)
		return
	}
	if f := turn.turn.Fault; f != nil && (f.Kind == FaultHTTPError || f.Kind == FaultAuth) {
		fail(body, turn.index, proto.errorFor(f))
		return
	}
	s.record(r, body, proto.name(), turn.index, http.StatusOK, requestID, imitates)
	s.log.Info("emulator request", "provider", proto.name(), "turn", turnLabel(turn.index, turn.turn.Name), "stream", info.stream, "request_id", requestID)

	c := &call{
		callInfo:  info,
		turn:      turn,
		requestID: requestID,
		created:   time.Now().Unix(),
		idSuffix:  s.idPrefix[:6] + fmt.Sprintf("%06x", n),
	}
	if info.stream {
		sw := newSSEWriter(r.Context(), w, s.done, proto, turn)
		defer sw.stop()
		err = proto.stream(sw, c)
		if err == nil {
			err = sw.finish()
		}
	} else {
		err = s.respondOnce(w, r, proto, c)
	}
	if err != nil && !errors.Is(err, errEnded) {
		s.log.Debug("emulator stream ended early", "request_id", requestID, "err", err)
	}
}

// respondOnce answers a non-streaming request, applying the stream faults
// in their one-body form: a stall delays the answer, a drop closes the
// connection without one, malformed and truncate send a cut-off body.
func (s *Server) respondOnce(w http.ResponseWriter, r *http.Request, proto protocol, c *call) error {
	sw := &sseWriter{ctx: r.Context(), done: s.done}
	defer sw.stop()
	if err := sw.sleep(c.turn.turn.FirstDelay); err != nil {
		return err
	}
	f := c.turn.turn.Fault
	if f == nil {
		return proto.respond(w, c)
	}
	switch f.Kind {
	case FaultStall:
		var err error
		if f.Duration > 0 {
			err = sw.sleep(f.Duration)
		} else {
			err = sw.waitForever()
		}
		if err != nil {
			return err
		}
	case FaultDrop:
		sw.w, sw.rc = w, http.NewResponseController(w)
		sw.drop(f.Reset)
		return errEnded
	case FaultMalformed, FaultTruncate:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		body := f.Body
		if body == "" {
			body = `{"id":"` + c.requestID + `","content":"cut of`
		}
		_, err := io.WriteString(w, body)
		if err != nil {
			return err
		}
		return errEnded
	case FaultStreamError:
		// Without a stream there is no in-band error: answer the status
		// the provider would have used (Anthropic's overloaded 529).
		status := http.StatusInternalServerError
		if proto.name() == "anthropic" {
			status = 529
		}
		proto.writeError(w, c.requestID, proto.errorFor(&Fault{Kind: FaultHTTPError, Status: status, Message: f.Message, Type: f.Type, Code: f.Code}))
		return errEnded
	}
	return proto.respond(w, c)
}

// pick chooses the turn for a request whose last message is lastText.
func (s *Server) pick(lastText string) (*compiledTurn, *apiError) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.matchers {
		for i := range s.turns {
			t := &s.turns[i]
			if (!s.used[i] || t.turn.Repeat) && t.turn.Match != "" && strings.Contains(lastText, t.turn.Match) {
				s.used[i] = true
				return t, nil
			}
		}
	}
	for i := range s.turns {
		if !s.used[i] && s.turns[i].turn.Match == "" {
			s.used[i] = true
			return &s.turns[i], nil
		}
	}
	if s.script.OnExhausted == ExhaustedRepeatLast && len(s.turns) > 0 {
		return &s.turns[len(s.turns)-1], nil
	}
	msg := "emulator: script exhausted: "
	if len(s.turns) == 0 {
		msg += "the script has no turns"
	} else {
		played := 0
		for _, u := range s.used {
			if u {
				played++
			}
		}
		msg += fmt.Sprintf("%d of %d turns played and no turn is left for this request", played, len(s.turns))
		if s.matchers {
			msg += fmt.Sprintf(" (its last message %q matches no unplayed turn)", clip(lastText, 120))
		}
	}
	return nil, &apiError{status: http.StatusInternalServerError, typ: "api_error", code: "script_exhausted", message: msg}
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func (s *Server) record(r *http.Request, body []byte, provider string, turn, status int, requestID, imitates string) {
	if !s.opts.record {
		return
	}
	rec := record{
		at: time.Now(), method: r.Method, path: r.URL.Path, header: r.Header.Clone(),
		body: body, provider: provider, turn: turn, status: status, requestID: requestID, imitates: imitates,
	}
	s.mu.Lock()
	s.seq++
	rec.seq = s.seq
	s.records = append(s.records, rec)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
}

// routeOf splits a path into the catalog provider it imitates, when its
// first segment is one ("/deepseek/chat/completions"), and the rest.
func (s *Server) routeOf(path string) (route, string) {
	if first, rest, ok := strings.Cut(strings.TrimPrefix(path, "/"), "/"); ok {
		if p := s.catalog.Provider(first); p != nil {
			return route{provider: p, strict: true}, "/" + rest
		}
	}
	return route{}, path
}

// bearer returns the token of an "Authorization: Bearer" header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if len(h) > 7 && strings.EqualFold(h[:7], "bearer ") {
		return strings.TrimSpace(h[7:])
	}
	return ""
}

func keyEqual(got, want string) bool {
	return got != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// messageText collects the text of one decoded chat message: string
// content, the text of content parts, and tool results, for Match.
func messageText(v any) string {
	var b strings.Builder
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte('\n')
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			if t, ok := x["text"].(string); ok {
				b.WriteString(t)
				b.WriteByte('\n')
			}
			if u := imageURL(x); u != "" {
				b.WriteString("[image " + u + "]\n")
			}
			if c, ok := x["content"]; ok {
				walk(c)
			}
		}
	}
	if m, ok := v.(map[string]any); ok {
		walk(m["content"])
	}
	return b.String()
}

// imageURL returns the image of a content part as a URL: the Responses
// API's input_image (image_url a string), Chat Completions' image_url part
// (image_url.url), and Anthropic's and Gemini's inline base64 data (made
// a data URL); empty for any other part. Match sees it as "[image URL]",
// so a script can answer only a request that carries a given image.
func imageURL(part map[string]any) string {
	switch u := part["image_url"].(type) {
	case string:
		return u
	case map[string]any:
		s, _ := u["url"].(string)
		return s
	}
	for _, key := range []string{"source", "inline_data", "inlineData"} {
		if src, ok := part[key].(map[string]any); ok {
			data, _ := src["data"].(string)
			mime, _ := src["media_type"].(string)
			if mime == "" {
				mime, _ = src["mime_type"].(string)
			}
			if mime == "" {
				mime, _ = src["mimeType"].(string)
			}
			if data != "" {
				return "data:" + mime + ";base64," + data
			}
			if u, _ := src["url"].(string); u != "" {
				return u
			}
		}
	}
	return ""
}

// lastMessageText decodes the last raw message for Match.
func lastMessageText(msgs []json.RawMessage) string {
	if len(msgs) == 0 {
		return ""
	}
	var v any
	if json.Unmarshal(msgs[len(msgs)-1], &v) != nil {
		return ""
	}
	return messageText(v)
}
