package environment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cmdpolicy"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/custom"
	"github.com/penguin-agent/penguin/services/environment/framing"
	"github.com/penguin-agent/penguin/services/environment/mcp"
	"github.com/penguin-agent/penguin/services/environment/redact"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// errInvalid marks a request the caller must fix; the service answers
// InvalidArgument.
var errInvalid = errors.New("invalid request")

// errUnconfinedRefused is sandbox mode none asked of a service that
// confines every environment (Options.SandboxRequired); the service
// answers FailedPrecondition.
var errUnconfinedRefused = errors.New("sandbox mode none is refused: this service confines every environment (--sandbox-required)")

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errInvalid, fmt.Sprintf(format, args...))
}

// disposeCallWait bounds how long disposal waits for aborted calls.
const disposeCallWait = 15 * time.Second

var toolName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`) })

// Environment is one workspace with its tools, command sessions and MCP
// connections.
type Environment struct {
	id        string
	label     string
	workspace string
	archive   *archiveDir // the directory of truncated outputs
	root      *workspace.Root
	policy    *cmdpolicy.Policy
	vault     *redact.Vault
	commands  *commandRunner // its sandbox and commands, started by the first command
	// commandEnv is the commands' environment, and the part of it a
	// login profile cannot override (see CommandEnv), made at the first
	// command or custom tool that needs it: most environments run none.
	commandEnv func() (env, fixed []string)
	mcpConns   []*mcp.Conn
	mcpEnd     *penguinv1.McpConnectEnd
	endWrites  func() // ends the MCP servers' registration with the writeTracker
	endStore   func() // ends the workspace's hold on its checkpoint store (see heldStores)
	notices    *notices
	log        *slog.Logger

	order  []string
	tools  map[string]tool.Spec
	params map[string]tool.Params // what each tool's schema allows, for the strict check

	framing framing.Options // the options every call shares

	ctx    context.Context // ends at disposal, aborting running calls
	cancel context.CancelFunc
	once   sync.Once

	callsMu  sync.Mutex
	closing  bool
	calls    int
	idle     chan struct{} // closed when closing and no call runs
	disposed chan struct{} // closed when disposal has finished
}

// enter registers a running call; it fails once disposal has begun.
func (e *Environment) enter() bool {
	e.callsMu.Lock()
	defer e.callsMu.Unlock()
	if e.closing {
		return false
	}
	e.calls++
	return true
}

// leave ends a call registered by enter.
func (e *Environment) leave() {
	e.callsMu.Lock()
	defer e.callsMu.Unlock()
	e.calls--
	if e.closing && e.calls == 0 {
		close(e.idle)
	}
}

// toolInfos lists the tools in the order they are offered.
func (e *Environment) toolInfos() []*penguinv1.ToolInfo {
	out := make([]*penguinv1.ToolInfo, 0, len(e.order))
	for _, name := range e.order {
		s := e.tools[name]
		out = append(out, &penguinv1.ToolInfo{Definition: s.Tool.Definition(), Permission: s.Tool.Permission()})
	}
	return out
}

// add registers a tool, refusing a duplicate name.
func (e *Environment) add(s tool.Spec) error {
	name := s.Tool.Definition().GetName()
	if _, dup := e.tools[name]; dup {
		return fmt.Errorf("two tools are named %q", name)
	}
	e.tools[name] = s
	e.params[name] = tool.ParseParams(s.Tool.Definition().GetParameters())
	e.order = append(e.order, name)
	return nil
}

// assembleBuiltins adds the builtin tools the configuration asks for,
// with their overrides; an empty list means every builtin with defaults.
func (e *Environment) assembleBuiltins(specs []*penguinv1.ToolSpec, all []tool.Spec) error {
	if len(specs) == 0 {
		for _, s := range all {
			if err := e.add(s); err != nil {
				return err
			}
		}
		return nil
	}
	byName := make(map[string]tool.Spec, len(all))
	names := make([]string, 0, len(all))
	for _, s := range all {
		n := s.Tool.Definition().GetName()
		byName[n] = s
		names = append(names, n)
	}
	for _, spec := range specs {
		base, ok := byName[spec.GetName()]
		if !ok {
			return invalid("unknown builtin tool %q (the builtins are %s)", spec.GetName(), strings.Join(names, ", "))
		}
		if spec.GetCommand() != "" {
			return invalid("builtin tool %q cannot have a command; declare a custom tool instead", spec.GetName())
		}
		s, err := override(base, spec)
		if err != nil {
			return err
		}
		if err := e.add(s); err != nil {
			return invalid("%v", err)
		}
	}
	return nil
}

// override applies a ToolSpec's overrides to a tool.
func override(base tool.Spec, spec *penguinv1.ToolSpec) (tool.Spec, error) {
	d := base.Tool.Definition()
	def := &penguinv1.ToolDefinition{Name: d.GetName(), Description: d.GetDescription(), Parameters: d.GetParameters()}
	if spec.GetDescription() != "" {
		def.Description = spec.GetDescription()
	}
	if spec.GetParameters() != "" {
		if !json.Valid([]byte(spec.GetParameters())) {
			return tool.Spec{}, invalid("the parameters of tool %q are not valid JSON", spec.GetName())
		}
		def.Parameters = spec.GetParameters()
	}
	perm := base.Tool.Permission()
	if spec.GetPermission() != penguinv1.Permission_PERMISSION_UNSPECIFIED {
		perm = spec.GetPermission()
	}
	limits := applyLimits(base.Limits, spec)
	return tool.Spec{Tool: &overridden{Tool: base.Tool, def: def, perm: perm}, Limits: limits, ReadsOnly: base.ReadsOnly}, nil
}

// applyLimits applies a ToolSpec's timeout and output cap: unset keeps the
// default, zero or less turns the bound off.
func applyLimits(l tool.Limits, spec *penguinv1.ToolSpec) tool.Limits {
	if spec.TimeoutMs != nil {
		l.Timeout = 0
		if *spec.TimeoutMs > 0 {
			l.Timeout = time.Duration(*spec.TimeoutMs) * time.Millisecond
		}
	}
	if spec.MaxOutputLength != nil {
		l.MaxOutput = 0
		if *spec.MaxOutputLength > 0 {
			l.MaxOutput = int(*spec.MaxOutputLength)
		}
	}
	return l
}

// overridden is a tool with a replaced definition or permission.
type overridden struct {
	tool.Tool
	def  *penguinv1.ToolDefinition
	perm penguinv1.Permission
}

func (o *overridden) Definition() *penguinv1.ToolDefinition { return o.def }
func (o *overridden) Permission() penguinv1.Permission      { return o.perm }

// assembleCustom adds the custom tools.
func (e *Environment) assembleCustom(specs []*penguinv1.ToolSpec, opts custom.Options) error {
	for _, spec := range specs {
		if !toolName().MatchString(spec.GetName()) {
			return invalid("custom tool name %q must be 1 to 64 letters, digits, \"_\" or \"-\"", spec.GetName())
		}
		if strings.HasPrefix(spec.GetName(), "mcp__") {
			return invalid("custom tool name %q uses the mcp__ prefix, which is reserved for MCP tools", spec.GetName())
		}
		if spec.GetParameters() != "" && !json.Valid([]byte(spec.GetParameters())) {
			return invalid("the parameters of tool %q are not valid JSON", spec.GetName())
		}
		t, err := custom.New(spec, opts)
		if err != nil {
			return invalid("%v", err)
		}
		limits := applyLimits(tool.Limits{Timeout: tool.DefaultTimeout, MaxOutput: tool.DefaultMaxOutput}, spec)
		if err := e.add(tool.Spec{Tool: t, Limits: limits}); err != nil {
			return invalid("%v", err)
		}
	}
	return nil
}

// execute runs one tool call and streams its frames through send.
func (e *Environment) execute(ctx context.Context, call *penguinv1.ToolCall, send framing.Sender) {
	id := call.GetToolCallId()
	opts := e.framing
	spec, ok := e.tools[call.GetName()]
	if !ok {
		framing.Reply(ctx, id, fmt.Sprintf("Unknown tool %q. The tools of this environment are: %s.", call.GetName(), strings.Join(e.order, ", ")),
			penguinv1.StopReason_STOP_REASON_FAILED, opts, send)
		return
	}
	// The policy and the tool must read the same arguments: keys that
	// they could read differently are refused before either looks.
	if err := e.params[call.GetName()].Check(call.GetArguments()); err != nil {
		framing.Reply(ctx, id, fmt.Sprintf("The arguments were refused, so %s did not run: %v.", call.GetName(), err),
			penguinv1.StopReason_STOP_REASON_FAILED, opts, send)
		return
	}
	if forbidden, rule := e.policy.Evaluate(call.GetName(), call.GetArguments()); forbidden {
		e.log.Info("tool call forbidden by the command policy", "environment", e.id, "tool", call.GetName(), "rule", rule, "tool_call_id", id)
		framing.Reply(ctx, id, cmdpolicy.DeniedOutput, penguinv1.StopReason_STOP_REASON_ABORTED, opts, send)
		return
	}
	opts.Limits = spec.Limits
	framing.Run(ctx, id, spec.Tool, call.GetArguments(), opts, send)
}

// backgroundDone turns a finished background command into a notice.
func (e *Environment) backgroundDone(s *command.Session) {
	info := s.Info()
	text := strings.ToValidUTF8(string(s.TakeUnread()), "\uFFFD")
	text = e.vault.String(text)
	limit := tool.DefaultMaxOutput
	if spec, ok := e.tools["exec_command"]; ok && spec.Limits.MaxOutput > 0 {
		limit = spec.Limits.MaxOutput
	}
	text = tailChars(text, limit)
	stop := penguinv1.StopReason_STOP_REASON_COMPLETED
	if info.ExitCode != 0 {
		stop = penguinv1.StopReason_STOP_REASON_FAILED
	}
	e.notices.publish(&penguinv1.WatchEnvironmentResponse{Notice: &penguinv1.WatchEnvironmentResponse_BackgroundDone{
		BackgroundDone: &penguinv1.BackgroundDone{
			ProcessId: info.ID, Command: e.vault.String(info.Command), ExitCode: int32(info.ExitCode), Output: text, StopReason: stop,
		},
	}})
}

// tailChars keeps the last n characters of s, marking the cut.
func tailChars(s string, n int) string {
	total := utf8.RuneCountInString(s)
	if n <= 0 || total <= n {
		return s
	}
	skip := total - n
	i := 0
	for idx := range s {
		if i == skip {
			return fmt.Sprintf("[... %d earlier characters not shown ...]\n", skip) + s[idx:]
		}
		i++
	}
	return s
}

// dispose ends everything the environment started. It is idempotent.
func (e *Environment) dispose() {
	e.once.Do(func() {
		e.callsMu.Lock()
		e.closing = true
		if e.calls == 0 {
			close(e.idle)
		}
		e.callsMu.Unlock()
		e.cancel()
		e.notices.close()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := e.commands.close(); err != nil {
				e.log.Warn("closing the sandbox", "error", err)
			}
		}()
		for _, c := range e.mcpConns {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c.Close()
			}()
		}
		wg.Wait()
		if e.endWrites != nil {
			e.endWrites()
		}
		select {
		case <-e.idle:
		case <-time.After(disposeCallWait):
			// A call stuck sending to a caller that stopped reading; it
			// ends with its RPC.
			e.log.Warn("disposing with tool calls still running", "environment", e.id)
		}
		// Calls still stuck here find the handles closed and fail.
		if e.root != nil {
			e.root.Close()
		}
		if e.archive != nil {
			e.archive.close()
		}
		if e.endStore != nil {
			e.endStore()
		}
		close(e.disposed)
	})
	<-e.disposed
}
