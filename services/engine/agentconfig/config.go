package agentconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
)

// Config is an agent's behaviour as written in system_config.yaml. The file
// is not deep-merged with the defaults: a key written in the file replaces
// the default wholesale (a tools.builtin list replaces the whole default
// tool set), and only keys left out keep their defaults.
type Config struct {
	// Name is the agent's display name.
	Name string `yaml:"name"`
	// Description says what the agent is for.
	Description string `yaml:"description"`
	// Version is the agent state's version, a natural number that an
	// optimizer bumps on each accepted change.
	Version int `yaml:"version"`
	// SystemPrompt is the system prompt template; see State.SystemPrompt for
	// its placeholders.
	SystemPrompt string `yaml:"system_prompt"`
	// MaxTurns caps the model requests of one task; -1 means no cap.
	MaxTurns int `yaml:"max_turns"`
	// DurableTasks makes a task outlive the engine running it: when that
	// engine dies or stops, the task resumes from its log on the replica
	// that takes its lease (or on the engine restarted), with no client
	// re-sending anything. Off, a cut-off task stays stopped and its
	// pending input waits for the next Run.
	DurableTasks bool `yaml:"durable_tasks"`
	// Model holds the model request settings.
	Model ModelSettings `yaml:"model"`
	// Compaction decides when and how the context is shrunk.
	Compaction CompactionSettings `yaml:"compaction"`
	// Tools is the tool set.
	Tools ToolSettings `yaml:"tools"`
	// Retry is the reconnect policy for failed model requests.
	Retry RetrySettings `yaml:"retry"`
	// Vault is the {{VAULT}} section of the system prompt.
	Vault SectionSettings `yaml:"vault"`
	// Skills is the {{SKILLS}} section of the system prompt.
	Skills SectionSettings `yaml:"skills"`
	// Memory is the {{MEMORY}} section of the system prompt.
	Memory MemorySettings `yaml:"memory"`
	// KernelVersion is PenguinHarness's record of which generation of its
	// built-in defaults the file started from. Penguin has no generations
	// of its own; it keeps the key so that a file moved over and back
	// keeps it, and reads nothing from it.
	KernelVersion string `yaml:"kernel_version,omitempty"`
	// Schedules is the {{SCHEDULES}} section, which teaches the model to
	// manage the agent's schedules with its agent-file tools; its prompt
	// may use {{SCHEDULE_LIST}}, the current schedules. Off (the
	// default), both placeholders expand to nothing, and the schedules
	// still fire; an empty prompt takes DefaultSchedulesPrompt.
	Schedules SectionSettings `yaml:"schedules,omitempty"`
}

// ModelRef names a model by its (provider, model id) pair. The two halves
// are always kept apart: the provider is never guessed from the model id.
type ModelRef struct {
	// Provider is the provider route, such as "openai".
	Provider string `yaml:"provider,omitempty"`
	// ModelID is the model id sent to the provider.
	ModelID string `yaml:"model_id,omitempty"`
}

// IsZero reports whether neither half is set.
func (r ModelRef) IsZero() bool { return r.Provider == "" && r.ModelID == "" }

// Proto returns the model reference for the llm service, or nil when unset.
func (r ModelRef) Proto() *penguinv1.ModelRef {
	if r.IsZero() {
		return nil
	}
	return &penguinv1.ModelRef{Provider: r.Provider, ModelId: r.ModelID}
}

// ModelSettings are the model request settings of an agent. The model of a
// session is chosen when the session is created; Provider and ModelID here
// are only the agent's default for clients that do not choose.
type ModelSettings struct {
	// Provider is the default provider route; empty means none.
	Provider string `yaml:"provider,omitempty"`
	// ModelID is the default model id; set together with Provider.
	ModelID string `yaml:"model_id,omitempty"`
	// ThinkingLevel is the default reasoning effort: none, low, medium,
	// high, xhigh or max.
	ThinkingLevel string `yaml:"thinking_level"`
	// MaxTokens caps the output tokens of one request; -1 leaves it to the
	// provider.
	MaxTokens int64 `yaml:"max_tokens"`
	// ContextWindow overrides the gateway's model table; zero keeps it.
	ContextWindow int64 `yaml:"context_window,omitempty"`
	// RequestTimeoutMS is the timeout of one model request in milliseconds;
	// zero or less turns it off.
	RequestTimeoutMS int64 `yaml:"request_timeout_ms"`
	// VisionModel reads images for text-only models (describe_image).
	VisionModel ModelRef `yaml:"vision_model,omitempty"`
}

// Ref returns the agent's default model, or nil when none is set.
func (m ModelSettings) Ref() *penguinv1.ModelRef {
	return ModelRef{Provider: m.Provider, ModelID: m.ModelID}.Proto()
}

// ThinkingLevelProto returns the thinking level as the contract's enum.
func (m ModelSettings) ThinkingLevelProto() penguinv1.ThinkingLevel {
	l, _ := ParseThinkingLevel(m.ThinkingLevel)
	return l
}

// MaxTokensProto returns the output cap as the llm service takes it, where
// zero means the model's default.
func (m ModelSettings) MaxTokensProto() int64 {
	if m.MaxTokens < 0 {
		return 0
	}
	return m.MaxTokens
}

// RequestTimeout returns the request timeout; zero means none.
func (m ModelSettings) RequestTimeout() time.Duration {
	if m.RequestTimeoutMS <= 0 {
		return 0
	}
	return time.Duration(m.RequestTimeoutMS) * time.Millisecond
}

// ParseThinkingLevel reads a thinking level name (none, low, medium, high,
// xhigh, max); the empty name is THINKING_LEVEL_UNSPECIFIED.
func ParseThinkingLevel(s string) (penguinv1.ThinkingLevel, error) {
	if s == "" {
		return penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED, nil
	}
	if l, ok := enumword.Parse[penguinv1.ThinkingLevel](strings.ToLower(s)); ok {
		return l, nil
	}
	return penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED,
		fmt.Errorf("unknown thinking level %q: expected none, low, medium, high, xhigh or max", s)
}

// Compaction modes.
const (
	// ModeSummarize has the model write a summary that replaces the history.
	ModeSummarize = "summarize"
	// ModeDiscard drops the history.
	ModeDiscard = "discard"
)

// CompactionSettings decide when and how a session's context is shrunk.
type CompactionSettings struct {
	// Enabled turns the automatic triggers on; a manual compaction works
	// either way.
	Enabled bool `yaml:"enabled"`
	// Mode is summarize or discard.
	Mode string `yaml:"mode"`
	// ContextThreshold is the context size in tokens (the last request's
	// total) that triggers a compaction; zero or less turns the trigger off.
	// The effective threshold is also capped by the model's context window
	// less 2048 (see EffectiveContextThreshold).
	ContextThreshold int64 `yaml:"context_threshold"`
	// TurnsThreshold is the session turn count that triggers a compaction;
	// zero or less turns the trigger off.
	TurnsThreshold int64 `yaml:"turns_threshold"`
	// Prompt is the instruction appended to the context in summarize mode.
	Prompt string `yaml:"prompt"`
	// RetryNote goes ahead of Prompt when a previous attempt produced no
	// usable summary (it called a tool, or its summary was empty).
	RetryNote string `yaml:"retry_note"`
}

// DefaultContextWindow is assumed for a model whose context window is not
// known.
const DefaultContextWindow = 128000

// contextHeadroom keeps a compaction inside a small model's window.
const contextHeadroom = 2048

// ModeProto returns the mode as the contract's enum.
func (c CompactionSettings) ModeProto() penguinv1.CompactionMode {
	if c.Mode == ModeDiscard {
		return penguinv1.CompactionMode_COMPACTION_MODE_DISCARD
	}
	return penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE
}

// EffectiveContextThreshold is the context size that triggers a compaction
// for a model with the given context window (zero when unknown, then
// DefaultContextWindow is assumed): the smaller of ContextThreshold and the
// window less 2048, so a small model compacts before it overflows. Zero
// means the context trigger is off.
func (c CompactionSettings) EffectiveContextThreshold(contextWindow int64) int64 {
	if !c.Enabled || c.ContextThreshold <= 0 {
		return 0
	}
	if contextWindow <= 0 {
		contextWindow = DefaultContextWindow
	}
	limit := contextWindow - contextHeadroom
	if limit < 1 {
		limit = 1
	}
	return min(c.ContextThreshold, limit)
}

// ContextDue reports whether a context of total tokens calls for a
// compaction.
func (c CompactionSettings) ContextDue(total, contextWindow int64) bool {
	t := c.EffectiveContextThreshold(contextWindow)
	return t > 0 && total >= t
}

// TurnsDue reports whether a session's turn count calls for a compaction.
func (c CompactionSettings) TurnsDue(turns int64) bool {
	return c.Enabled && c.TurnsThreshold > 0 && turns >= c.TurnsThreshold
}

// RetrySettings are the reconnect policy for failed model requests: every
// outcome but auth and aborted is re-sent up to MaxAttempts times, waiting
// BaseDelay × 2ⁿ capped at MaxDelay between attempts. These are the
// numbers (their defaults are in Default); the ladder's arithmetic is
// loop.Retry's.
type RetrySettings struct {
	// MaxAttempts is how many times a failed request is re-sent.
	MaxAttempts int `yaml:"max_attempts"`
	// BaseDelay is the wait before the first re-send, written in YAML with
	// its unit ("2s").
	BaseDelay time.Duration `yaml:"base_delay"`
	// MaxDelay caps every wait.
	MaxDelay time.Duration `yaml:"max_delay"`
}

// SectionSettings are one optional section of the system prompt: a toggle
// and the section's own template.
type SectionSettings struct {
	// Enabled puts the section into the prompt; off, its placeholder
	// expands to nothing.
	Enabled bool `yaml:"enabled"`
	// Prompt is the section's template.
	Prompt string `yaml:"prompt"`
}

// MemorySettings are the {{MEMORY}} section: a part always present and a
// part added only in a persistent workspace.
type MemorySettings struct {
	// Enabled puts memory into the prompt and lets PrepareMemory create
	// its directories.
	Enabled bool `yaml:"enabled"`
	// Prompt is always included; it may use {{USER_MEMORY_INDEX}} and
	// {{USER_MEMORY_DIR}}.
	Prompt string `yaml:"prompt"`
	// WorkspacePrompt is added in a persistent workspace; it may use
	// {{WORKSPACE_MEMORY_INDEX}} and {{WORKSPACE_MEMORY_DIR}}.
	WorkspacePrompt string `yaml:"workspace_prompt"`
}

// ToolSettings is an agent's tool set. It maps onto the environment's
// penguinv1.ToolConfig (see State.ToolConfig), except for the tools the
// engine runs itself (see EngineToolNames).
type ToolSettings struct {
	// Builtin lists the builtin tools to offer, with overrides. Nil offers
	// every builtin with its defaults; a list replaces that set wholesale,
	// and an entry that leaves description or parameters empty keeps the
	// builtin's own.
	Builtin []ToolSpec `yaml:"builtin,omitempty"`
	// Custom lists tools backed by a command.
	Custom []ToolSpec `yaml:"custom,omitempty"`
	// MCPServers lists MCP servers whose tools join as mcp__<name>__<tool>.
	MCPServers []MCPServer `yaml:"mcp_servers,omitempty"`
}

// ToolSpec is one tool entry.
type ToolSpec struct {
	// Name is the tool's name as the model calls it.
	Name string `yaml:"name"`
	// Description is handed to the model.
	Description string `yaml:"description,omitempty"`
	// Parameters is the JSON Schema of the arguments.
	Parameters JSONSchema `yaml:"parameters,omitempty"`
	// Permission is r (reads only) or rw; empty keeps a builtin's own and
	// means rw for a custom tool.
	Permission string `yaml:"permission,omitempty"`
	// ForModel limits the tool to vision or text-only models; empty means
	// every model.
	ForModel string `yaml:"for_model,omitempty"`
	// TimeoutMS is the per-call timeout; nil keeps the default, zero or
	// less turns it off.
	TimeoutMS *int64 `yaml:"timeout_ms,omitempty"`
	// MaxOutputLength caps the output in characters; nil keeps the
	// default, zero or less turns truncation off.
	MaxOutputLength *int64 `yaml:"max_output_length,omitempty"`
	// CallDescription, when false, removes the "description" call argument
	// from the schema; nil keeps it.
	CallDescription *bool `yaml:"call_description,omitempty"`
	// Command runs a custom tool (bash -c, arguments on stdin and in
	// PENGUIN_TOOL_ARGS); empty for a builtin.
	Command string `yaml:"command,omitempty"`
}

// MCPServer configures one MCP server.
type MCPServer struct {
	// Name prefixes the server's tools: letters, digits, "_" and "-".
	Name string `yaml:"name"`
	// Transport is stdio, http (streamable HTTP) or sse (the legacy
	// HTTP+SSE transport); empty infers stdio from Command and http from
	// URL.
	Transport string `yaml:"transport,omitempty"`
	// Command starts a stdio server.
	Command string `yaml:"command,omitempty"`
	// Args are its arguments.
	Args []string `yaml:"args,omitempty"`
	// Env adds environment variables to a stdio server; the vault is not
	// injected into MCP servers.
	Env map[string]string `yaml:"env,omitempty"`
	// Cwd is a stdio server's directory; empty means the workspace.
	Cwd string `yaml:"cwd,omitempty"`
	// URL is an http server's endpoint.
	URL string `yaml:"url,omitempty"`
	// Headers are sent with every http request, such as Authorization.
	Headers map[string]string `yaml:"headers,omitempty"`
	// ConnectTimeoutMS bounds connecting and listing tools; zero means
	// 10000.
	ConnectTimeoutMS int64 `yaml:"connect_timeout_ms,omitempty"`
	// TimeoutMS is the per-call timeout of every tool of the server; zero
	// means the environment's default.
	TimeoutMS int64 `yaml:"timeout_ms,omitempty"`
	// MaxOutputLength caps the output of every tool of the server, in
	// characters; nil keeps the environment's default, zero or less turns
	// truncation off.
	MaxOutputLength *int64 `yaml:"max_output_length,omitempty"`
	// Permission is auto (from the tool's readOnlyHint), r or rw.
	Permission string `yaml:"permission,omitempty"`
}

// Default returns the built-in configuration, the one Init writes.
func Default() Config {
	return Config{
		Name:         "default",
		Description:  "A general-purpose coding agent.",
		Version:      1,
		SystemPrompt: DefaultSystemPrompt,
		MaxTurns:     -1,
		DurableTasks: true,
		Model: ModelSettings{
			ThinkingLevel:    "medium",
			MaxTokens:        32000,
			RequestTimeoutMS: 120000,
		},
		Compaction: CompactionSettings{
			Enabled:          true,
			Mode:             ModeSummarize,
			ContextThreshold: 256000,
			TurnsThreshold:   -1,
			Prompt:           DefaultCompactionPrompt,
			RetryNote:        DefaultCompactionRetryNote,
		},
		Retry: RetrySettings{
			MaxAttempts: 5,
			BaseDelay:   2 * time.Second,
			MaxDelay:    30 * time.Second,
		},
		Vault:  SectionSettings{Enabled: true, Prompt: DefaultVaultPrompt},
		Skills: SectionSettings{Enabled: true, Prompt: DefaultSkillsPrompt},
		Memory: MemorySettings{
			Enabled:         true,
			Prompt:          DefaultMemoryPrompt,
			WorkspacePrompt: DefaultMemoryWorkspacePrompt,
		},
	}
}

var (
	// toolNameRe is what every provider accepts as a function name.
	toolNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })
	// serverNameRe keeps MCP tool names (mcp__<server>__<tool>) valid.
	serverNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })
)

// Validate checks every field and returns all problems, each a
// *ConfigError naming the key.
func (c *Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if strings.TrimSpace(c.SystemPrompt) == "" {
		bad("system_prompt", "must not be empty (leave the key out for the built-in template)")
	}
	if c.Version < 0 {
		bad("version", "must be a natural number, got %d", c.Version)
	}
	if c.MaxTurns == 0 || c.MaxTurns < -1 {
		bad("max_turns", "must be -1 (no limit) or a positive number, got %d", c.MaxTurns)
	}

	m := c.Model
	if (m.Provider == "") != (m.ModelID == "") {
		bad("model", "provider and model_id go together: set both or neither")
	}
	if _, err := ParseThinkingLevel(m.ThinkingLevel); err != nil || m.ThinkingLevel == "" {
		bad("model.thinking_level", "must be none, low, medium, high, xhigh or max, got %q", m.ThinkingLevel)
	}
	if m.MaxTokens == 0 || m.MaxTokens < -1 {
		bad("model.max_tokens", "must be -1 (the provider's default) or a positive number, got %d", m.MaxTokens)
	}
	if m.ContextWindow < 0 {
		bad("model.context_window", "must not be negative, got %d", m.ContextWindow)
	}
	if (m.VisionModel.Provider == "") != (m.VisionModel.ModelID == "") {
		bad("model.vision_model", "provider and model_id go together: set both or neither")
	}

	cp := c.Compaction
	if cp.Mode != ModeSummarize && cp.Mode != ModeDiscard {
		bad("compaction.mode", "must be summarize or discard, got %q", cp.Mode)
	}
	if cp.Mode == ModeSummarize && strings.TrimSpace(cp.Prompt) == "" {
		bad("compaction.prompt", "must not be empty in summarize mode (leave the key out for the built-in prompt)")
	}

	r := c.Retry
	if r.MaxAttempts < 0 {
		bad("retry.max_attempts", "must not be negative, got %d", r.MaxAttempts)
	}
	if r.BaseDelay <= 0 {
		bad("retry.base_delay", "must be positive, got %s", r.BaseDelay)
	}
	if r.MaxDelay < r.BaseDelay {
		bad("retry.max_delay", "must be at least base_delay (%s), got %s", r.BaseDelay, r.MaxDelay)
	}

	errs = append(errs, c.Tools.validate()...)
	return errors.Join(errs...)
}

func (t *ToolSettings) validate() []error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if t.Builtin != nil && len(t.Builtin) == 0 {
		bad("tools.builtin", "an empty list cannot be told from the default set: leave the key out for every builtin, or list the ones to keep")
	}
	seen := map[string]string{}
	check := func(kind string, i int, s ToolSpec) {
		f := fmt.Sprintf("tools.%s[%d]", kind, i)
		if !toolNameRe().MatchString(s.Name) {
			bad(f+".name", "must be 1 to 64 letters, digits, \"_\" or \"-\", got %q", s.Name)
		} else if prev, dup := seen[s.Name]; dup {
			bad(f+".name", "%q is already declared at %s", s.Name, prev)
		} else {
			seen[s.Name] = f
		}
		if strings.HasPrefix(s.Name, "mcp__") {
			bad(f+".name", "the mcp__ prefix is reserved for MCP server tools")
		}
		switch s.Permission {
		case "", "r", "rw":
		default:
			bad(f+".permission", "must be r or rw, got %q", s.Permission)
		}
		switch s.ForModel {
		case "", "vision", "text-only":
		default:
			bad(f+".for_model", "must be vision or text-only, got %q", s.ForModel)
		}
		if s.Parameters != "" {
			var obj map[string]any
			if err := json.Unmarshal([]byte(s.Parameters), &obj); err != nil {
				bad(f+".parameters", "must be a JSON Schema object: %v", err)
			} else if typ, ok := obj["type"]; ok && typ != "object" {
				bad(f+".parameters", "the arguments schema must have type object, got %v", typ)
			}
		}
		if kind == "builtin" && s.Command != "" {
			bad(f+".command", "only a custom tool has a command (move this entry to tools.custom)")
		}
		if kind == "custom" {
			if strings.TrimSpace(s.Command) == "" {
				bad(f+".command", "a custom tool needs a command")
			}
			if strings.TrimSpace(s.Description) == "" {
				bad(f+".description", "a custom tool needs a description for the model")
			}
			if s.Parameters == "" {
				bad(f+".parameters", "a custom tool needs a parameters JSON Schema")
			}
			if isEngineTool(s.Name) {
				bad(f+".name", "%q is an engine tool: configure it under tools.builtin", s.Name)
			}
		}
	}
	for i, s := range t.Builtin {
		check("builtin", i, s)
	}
	for i, s := range t.Custom {
		check("custom", i, s)
	}
	servers := map[string]int{}
	for i, s := range t.MCPServers {
		f := fmt.Sprintf("tools.mcp_servers[%d]", i)
		if !serverNameRe().MatchString(s.Name) {
			bad(f+".name", "must be letters, digits, \"_\" or \"-\", got %q", s.Name)
		} else if prev, dup := servers[s.Name]; dup {
			bad(f+".name", "%q is already declared at tools.mcp_servers[%d]", s.Name, prev)
		} else {
			servers[s.Name] = i
		}
		transport := s.EffectiveTransport()
		switch transport {
		case "stdio":
			if s.Command == "" {
				bad(f+".command", "a stdio server needs a command")
			}
			if s.URL != "" || len(s.Headers) > 0 {
				bad(f, "a stdio server takes command, args, env and cwd, not url or headers")
			}
		case "http", "sse":
			if s.URL == "" {
				bad(f+".url", "an %s server needs a url", transport)
			}
			if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
				bad(f, "an %s server takes url and headers, not command, args, env or cwd", transport)
			}
		case "":
			bad(f, "needs a command (stdio) or a url (http)")
		default:
			bad(f+".transport", "must be stdio, http or sse (the legacy HTTP+SSE transport), got %q", s.Transport)
		}
		switch s.Permission {
		case "", "auto", "r", "rw":
		default:
			bad(f+".permission", "must be auto, r or rw, got %q", s.Permission)
		}
		if s.ConnectTimeoutMS < 0 {
			bad(f+".connect_timeout_ms", "must not be negative")
		}
		if s.TimeoutMS < 0 {
			bad(f+".timeout_ms", "must not be negative")
		}
	}
	return errs
}

// EffectiveTransport returns the transport, inferred from Command or URL
// when not written.
func (s MCPServer) EffectiveTransport() string {
	if s.Transport != "" {
		return s.Transport
	}
	switch {
	case s.Command != "":
		return "stdio"
	case s.URL != "":
		return "http"
	}
	return ""
}
