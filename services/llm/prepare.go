package llm

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/bytecache"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/llm/limits"
	"github.com/penguin-agent/penguin/services/llm/stream"
	"github.com/penguin-agent/penguin/services/llm/translate"
)

// InvalidRequestError is a request refused before any provider I/O; the
// RPC boundary turns it into InvalidArgument with its message.
type InvalidRequestError struct {
	msg string
}

// Error is the message the caller sees with InvalidArgument.
func (e *InvalidRequestError) Error() string { return e.msg }

func invalid(format string, args ...any) error {
	return &InvalidRequestError{msg: fmt.Sprintf(format, args...)}
}

// validToolName reports whether name has the shape both provider APIs
// accept for a tool, ^[a-zA-Z0-9_-]{1,64}$, checked byte by byte (every
// byte the shape takes is ASCII) rather than with the regular expression,
// which every tool of every request went through.
func validToolName(name string) bool {
	if len(name) < 1 || len(name) > 64 {
		return false
	}
	for i := range len(name) {
		switch c := name[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// prepare validates req and builds the provider-neutral request: the model
// reference and route, a well-formed history (complete messages only, every
// tool output answering an earlier call, images only for models that take
// them), sound tool definitions, and the output cap.
func (s *Service) prepare(req *penguinv1.StreamGenerateRequest) (*stream.Request, error) {
	if s.maxBytes > 0 {
		if n := proto.Size(req); n > s.maxBytes {
			return nil, invalid("request is %d bytes, more than the %d bytes the gateway takes; compact the history", n, s.maxBytes)
		}
	}
	if err := projectError(req.GetProject()); err != nil {
		return nil, invalid("%v", err)
	}
	reg := s.registry(req.GetProject())
	ref := req.GetModel()
	if ref.GetProvider() == "" {
		return nil, invalid("model.provider is required: name a provider route (known providers: %s)", known(reg))
	}
	if ref.GetModelId() == "" {
		return nil, invalid("model.model_id is required: name the model to call on provider %q", ref.GetProvider())
	}
	adapter, route, ok := reg.Lookup(ref.GetProvider())
	if !ok {
		return nil, invalid("unknown provider %q; known providers: %s", ref.GetProvider(), known(reg))
	}
	if _, ok := penguinv1.ThinkingLevel_name[int32(req.GetThinkingLevel())]; !ok {
		return nil, invalid("thinking_level %d is not a thinking level", req.GetThinkingLevel())
	}
	if req.GetMaxTokens() < 0 {
		return nil, invalid("max_tokens %d is negative", req.GetMaxTokens())
	}
	if req.GetContextWindow() < 0 {
		return nil, invalid("context_window %d is negative", req.GetContextWindow())
	}
	spec := route.Model(ref.GetModelId())
	if !spec.Known {
		s.unknownModel(route.Name, spec.ID)
	}
	if req.GetPrice() != nil {
		// The caller's price (a project's, for a model the table does not
		// price or prices otherwise) is what usage costs are computed with.
		cost, err := catalog.FromPrice("price", req.GetPrice())
		if err != nil {
			return nil, invalid("%v", err)
		}
		spec.Cost = cost
	}

	msgs, err := messages(req, spec)
	if err != nil {
		return nil, err
	}
	if err := checkTools(req.GetTools()); err != nil {
		return nil, err
	}
	if n := len(req.GetTools()); n > 0 && spec.NoTools {
		return nil, invalid("model %q of provider %q cannot call tools (the model catalog says so; set tools: true for it in the providers file if it can), but the request offers %d; offer none, or choose a model that calls tools",
			spec.ID, ref.GetProvider(), n)
	}

	window := req.GetContextWindow()
	if window == 0 {
		window = spec.ContextWindow
	}
	// The output cap: the caller's, never above the model's output limit;
	// the limit itself when the caller sets none, or a conservative value
	// when nobody knows the model's limit.
	want := req.GetMaxTokens()
	switch {
	case want == 0 && spec.MaxTokens == 0:
		want = UnknownModelMaxTokens
	case want == 0 || (spec.MaxTokens > 0 && want > spec.MaxTokens):
		want = spec.MaxTokens
	}
	var temperature *float32
	if req.Temperature != nil && spec.Temperature {
		t := req.GetTemperature()
		temperature = &t
	}
	input := limits.Input(req.GetSystemPrompt(), req.GetTools(), msgs)
	capTokens, room, err := limits.OutputCap(want, window, input)
	if err != nil {
		return nil, invalid("%v", err)
	}
	return &stream.Request{
		Provider:      ref.GetProvider(),
		Model:         ref.GetModelId(),
		Spec:          spec,
		Messages:      msgs,
		Tools:         req.GetTools(),
		System:        req.GetSystemPrompt(),
		Thinking:      req.GetThinkingLevel(),
		MaxTokens:     capTokens,
		OutputRoom:    room,
		InputEstimate: input,
		Temperature:   temperature,
		Adapter:       adapter,
	}, nil
}

// UnknownModelMaxTokens is the output cap of a model that neither the
// catalog nor the providers file describes: small enough for any model
// and server to take.
const UnknownModelMaxTokens = 4096

// maxUnknownLogged bounds the unknown models remembered for the log.
const maxUnknownLogged = 1024

// unknownModel says once per route and model that a model is not known
// and what the gateway sends it instead.
func (s *Service) unknownModel(route, model string) {
	// Bounded: a client sending made-up ids must not grow the set.
	if s.unknownN.Load() >= maxUnknownLogged {
		return
	}
	key := modelKey{route, model}
	s.unknownMu.RLock()
	seen := s.unknown[key]
	s.unknownMu.RUnlock()
	if seen {
		return
	}
	s.unknownMu.Lock()
	seen = s.unknown[key]
	if !seen {
		if s.unknown == nil {
			s.unknown = map[modelKey]bool{}
		}
		// Copies: the request's strings may share memory with more.
		s.unknown[modelKey{strings.Clone(route), strings.Clone(model)}] = true
		s.unknownN.Add(1)
	}
	s.unknownMu.Unlock()
	if seen {
		return
	}
	s.log.Warn("a model is not in the catalog or the providers file: it gets conservative defaults (add it to the providers file to change them)",
		"provider", route, "model", model, "max_tokens", UnknownModelMaxTokens, "reasoning", "none sent", "temperature", "not sent")
}

// messages joins history and new messages into the model conversation and
// checks each message. Events (and session_meta) are not part of a model
// context and are skipped, so a caller may pass a log slice as is; partials
// are refused, since they never belong in a request.
func messages(req *penguinv1.StreamGenerateRequest, spec stream.ModelSpec) ([]*penguinv1.OmniMessage, error) {
	all := make([]*penguinv1.OmniMessage, 0, len(req.GetHistory())+len(req.GetNewMessages()))
	calls := map[string]bool{}
	check := func(field string, list []*penguinv1.OmniMessage) error {
		for i, m := range list {
			where := position{field, i}
			switch omni.KindOf(m) {
			case omni.KindUnknown:
				return invalid("%s has no payload", where)
			case omni.KindPartial:
				return invalid("%s is a %s: requests carry complete messages only", where, payloadName(m))
			case omni.KindSessionMeta, omni.KindEvent:
				continue
			}
			if err := checkMessage(where, m, spec, calls); err != nil {
				return err
			}
			all = append(all, m)
		}
		return nil
	}
	if err := check("history", req.GetHistory()); err != nil {
		return nil, err
	}
	if err := check("new_messages", req.GetNewMessages()); err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, invalid("history and new_messages hold no model message: there is nothing to answer")
	}
	return all, nil
}

func checkMessage(where position, m *penguinv1.OmniMessage, spec stream.ModelSpec, calls map[string]bool) error {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_ToolCall:
		tc := p.ToolCall
		if tc.GetToolCallId() == "" {
			return invalid("%s is a tool_call with no tool_call_id", where)
		}
		if tc.GetName() == "" {
			return invalid("%s is a tool_call with no name", where)
		}
		calls[tc.GetToolCallId()] = true
	case *penguinv1.OmniMessage_ToolCallOutput:
		id := p.ToolCallOutput.GetToolCallId()
		if id == "" {
			return invalid("%s is a tool_call_output with no tool_call_id", where)
		}
		if !calls[id] {
			return invalid("%s is a tool_call_output for call %q, but no earlier tool_call has that id", where, id)
		}
		for j, img := range p.ToolCallOutput.GetImages() {
			if err := checkImage(fmt.Sprintf("%s.images[%d]", where, j), img, spec); err != nil {
				return err
			}
		}
	case *penguinv1.OmniMessage_ImageUrl:
		return checkImage(where.String()+".image_url", p.ImageUrl.GetImageUrl(), spec)
	case *penguinv1.OmniMessage_InlineData:
		mime := p.InlineData.GetMimeType()
		switch {
		case strings.HasPrefix(mime, "image/"):
			return checkImage(where.String(), "data:"+mime+";base64,"+p.InlineData.GetData(), spec)
		case strings.HasPrefix(mime, "text/"):
			if _, err := translate.InlineText(p.InlineData); err != nil {
				return invalid("%s: %v", where, err)
			}
		default:
			return invalid("%s is inline_data of type %q; the gateway sends images (image/*) and text (text/*) only", where, mime)
		}
	}
	return nil
}

func checkImage(where, url string, spec stream.ModelSpec) error {
	if spec.NoVision {
		return invalid("%s is an image, but model %q does not take images (vision is off in the providers configuration)", where, spec.ID)
	}
	if url == "" {
		return invalid("%s is an empty image URL", where)
	}
	if _, isData, err := translate.ParseDataURL(url); isData && err != nil {
		return invalid("%s: %v", where, err)
	} else if !isData && !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
		return invalid("%s: an image URL must be a data URL or an http(s) URL", where)
	}
	return nil
}

func checkTools(tools []*penguinv1.ToolDefinition) error {
	for i, t := range tools {
		where := position{"tools", i}
		if !validToolName(t.GetName()) {
			return invalid("%s: name %q must be 1-64 letters, digits, '_' or '-'", where, t.GetName())
		}
		if definedBefore(tools, i) {
			return invalid("%s: tool %q is defined twice", where, t.GetName())
		}
		if p := strings.TrimSpace(t.GetParameters()); p != "" && !objectOrNull(p) {
			// Decoding says precisely what is wrong; it runs only for
			// the error, since it costs several times the check.
			var obj map[string]json.RawMessage
			err := json.Unmarshal([]byte(p), &obj)
			if err == nil {
				err = errors.New("not an object")
			}
			return invalid("%s: parameters of %q are not a JSON Schema object: %v", where, t.GetName(), err)
		}
	}
	return nil
}

// definedBefore reports whether a tool before tools[i] has its name. A
// request's few tools are compared with each other, which allocates
// nothing; a map serves the long lists some MCP servers make.
func definedBefore(tools []*penguinv1.ToolDefinition, i int) bool {
	name := tools[i].GetName()
	if len(tools) <= 64 {
		for _, t := range tools[:i] {
			if t.GetName() == name {
				return true
			}
		}
		return false
	}
	seen := make(map[string]bool, i)
	for _, t := range tools[:i] {
		seen[t.GetName()] = true
	}
	return seen[name]
}

// objectOrNull reports whether p (trimmed, not empty) is valid JSON that
// decodes into a map: an object, or null. It is what decoding into a map
// accepts, checked without decoding, because every request carries every
// tool's schema and decoding them all would cost tens of microseconds per
// request before the provider is even called. The texts found valid are
// remembered (see validSchemas): a session sends the same tools at every
// request, and checking them again was most of preparing one.
func objectOrNull(p string) bool {
	if _, ok := validSchemas.Get(p); ok {
		return true
	}
	if (p[0] == '{' || p == "null") && json.Valid([]byte(p)) {
		// A copy, so that the set does not hold the request the text
		// came in.
		validSchemas.Put(strings.Clone(p), struct{}{}, len(p))
		return true
	}
	return false
}

// validSchemas is the tool parameter texts found to be JSON objects,
// within maxValidSchemaBytes in all; when full it starts over.
var validSchemas = bytecache.New[string, struct{}](maxValidSchemaBytes)

// maxValidSchemaBytes bounds the texts validSchemas holds: the tools of
// many agents and MCP servers.
const maxValidSchemaBytes = 1 << 20

// position names a message of the request in errors ("history[3]"). It is
// formatted only when an error is reported, since every request checks
// every message.
type position struct {
	field string
	index int
}

func (p position) String() string { return fmt.Sprintf("%s[%d]", p.field, p.index) }

func payloadName(m *penguinv1.OmniMessage) string {
	if f := m.ProtoReflect().WhichOneof(m.ProtoReflect().Descriptor().Oneofs().ByName("payload")); f != nil {
		return string(f.Name())
	}
	return "message"
}
