package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/credentials"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
)

// clientFlags are the flags of the client commands (run, chat, sessions)
// that choose the engine: a running server at --engine, or else an
// embedded all-in-one server started in this process, configured by the
// same flags as `penguin serve`.
type clientFlags struct {
	engine        string
	authTokenFile string
	embedded      *allInOneFlags
}

func addClientFlags(fs *pflag.FlagSet) *clientFlags {
	f := &clientFlags{}
	fs.StringVar(&f.engine, "engine", "", "address of a running engine (penguin serve); empty starts one inside this command")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "file holding the engine's bearer token (or set PENGUIN_AUTH_TOKEN)")
	f.embedded = addAllInOneFlags(fs)
	return f
}

// engineConn is a client of an engine, remote or embedded.
type engineConn struct {
	engine penguinv1.EngineServiceClient
	// llm is the model gateway of the same server: the all-in-one serves
	// it on the engine's port. A remote engine running alone answers
	// Unimplemented, which the callers treat as "no model list".
	llm penguinv1.LLMServiceClient
	// agents manages the agents of the same server, and schedules their
	// schedules.
	agents    penguinv1.AgentServiceClient
	schedules penguinv1.ScheduleServiceClient
	// conn reaches the server's other services (accounts, projects,
	// tokens).
	conn grpc.ClientConnInterface
	// agentState is the default agent's directory of an embedded engine,
	// empty for a remote one; defaultModel and defaultThinking are that
	// agent's model and thinking level.
	agentState      string
	defaultModel    *penguinv1.ModelRef
	defaultThinking penguinv1.ThinkingLevel
	// logPath is where an embedded server logs; empty for a remote one.
	logPath string
	close   func() error
}

// Close closes the connection and stops an embedded server.
func (c *engineConn) Close() error { return c.close() }

// connect dials --engine, or starts an embedded server and calls it
// through its in-process channel. An embedded server lives until Close, not until ctx ends:
// a task interrupted by Ctrl-C must still be aborted and shown to its end.
func (f *clientFlags) connect(ctx context.Context) (*engineConn, error) {
	if f.engine != "" {
		token, err := f.credential()
		if err != nil {
			return nil, err
		}
		conn, err := grpcclient.New(f.engine, grpcclient.Options{Token: token})
		if err != nil {
			return nil, err
		}
		return &engineConn{
			engine: penguinv1.NewEngineServiceClient(conn), llm: penguinv1.NewLLMServiceClient(conn),
			agents: penguinv1.NewAgentServiceClient(conn), schedules: penguinv1.NewScheduleServiceClient(conn), conn: conn, close: conn.Close,
		}, nil
	}
	if f.authTokenFile != "" {
		return nil, usageErrorf("--auth-token-file applies to --engine only")
	}
	srv, err := startEmbedded(ctx, f.embedded)
	if err != nil {
		return nil, fmt.Errorf("start the embedded engine: %w", err)
	}
	c := &engineConn{engine: srv.Engine, llm: srv.LLM, agents: srv.Agents, schedules: srv.Schedules, conn: srv.Conn, agentState: srv.agentDir, logPath: srv.logPath, close: srv.stop}
	if st, err := agentstate.Load(srv.agentDir); err == nil {
		c.defaultModel, c.defaultThinking = st.Config.Model.Ref(), st.Config.Model.ThinkingLevelProto()
	}
	return c, nil
}

// credential is what calls to --engine present: the token of
// PENGUIN_AUTH_TOKEN or --auth-token-file when one is given, else what
// `penguin login` stored for the server, else nothing.
func (f *clientFlags) credential() (string, error) {
	token, err := config.Secret(os.LookupEnv, "PENGUIN_AUTH_TOKEN", f.authTokenFile)
	if err != nil || token != "" {
		if err != nil {
			err = fmt.Errorf("auth token: %w", err)
		}
		return token, err
	}
	file, err := credentials.Default()
	if err != nil {
		return "", err
	}
	e, _, err := file.Get(f.engine)
	if err != nil {
		return "", fmt.Errorf("stored sign-in: %w", err)
	}
	return e.Secret, nil
}

// complete fills in the agent's default model when the flags named none.
// A remote engine keeps its agents to itself, so only an embedded one can
// be asked here; without a model the engine's answer says what is missing.
func (c *engineConn) complete(p *parsedSession) error {
	if p.model != nil {
		return nil
	}
	if c.agentState != "" && c.defaultModel == nil {
		return fmt.Errorf("no model: pass --provider and --model, or set model.provider and model.model_id in %s",
			filepath.Join(c.agentState, agentstate.ConfigFile))
	}
	p.model = c.defaultModel
	return nil
}

// defaultHome is Penguin's data directory when neither --home nor
// PENGUIN_HOME names one: the parent of the default agent's directory
// (~/.local/share/penguin on Linux).
func defaultHome() string {
	return filepath.Dir(filepath.Dir(agentstate.DefaultDir()))
}

// sessionFlags describe a new session: the model, the workspace, and how
// its tool calls are approved.
type sessionFlags struct {
	provider  string
	model     string
	workspace string
	approval  string
	thinking  string
	sandbox   string
	project   string
}

// The CLI spellings of the session settings, for help and completion.
var (
	approvalWords = []string{"allow-all", "deny-all", "read-only", "always-ask"}
	thinkingWords = []string{"none", "low", "medium", "high", "xhigh", "max"}
	sandboxWords  = []string{"none", "workspace-write", "read-only"}
)

func addSessionFlags(cmd *cobra.Command) *sessionFlags {
	f := &sessionFlags{}
	fs := cmd.Flags()
	fs.StringVar(&f.provider, "provider", "", "provider route of the model; give it with --model, or neither for the agent's default model")
	fs.StringVar(&f.model, "model", "", "model id; give it with --provider, or neither for the agent's default model")
	fs.StringVar(&f.workspace, "workspace", "", "workspace directory (default: the current directory)")
	fs.StringVar(&f.approval, "approval", "allow-all", "which tool calls need your approval: allow-all, deny-all, read-only or always-ask")
	fs.StringVar(&f.thinking, "thinking", "", "thinking level: none, low, medium, high, xhigh or max (default: the agent's)")
	fs.StringVar(&f.sandbox, "sandbox", "", "how commands are confined: workspace-write (as an unprivileged user in namespaces of their own, writing only to the workspace and their own /tmp, without network), read-only, or none (default: the server's, workspace-write where its host can enforce it)")
	fs.StringVar(&f.project, "project", "", "the project the session goes in (default: the default project, or your only one)")
	mustComplete(cmd, "approval", completeWords(approvalWords...))
	mustComplete(cmd, "thinking", completeWords(thinkingWords...))
	mustComplete(cmd, "sandbox", completeWords(sandboxWords...))
	mustComplete(cmd, "workspace", cobra.FixedCompletions(nil, cobra.ShellCompDirectiveFilterDirs))
	return f
}

// parsedSession is a sessionFlags checked and turned into the contract's values.
type parsedSession struct {
	model     *penguinv1.ModelRef
	workspace string
	approval  penguinv1.ApprovalMode
	thinking  penguinv1.ThinkingLevel
	sandbox   penguinv1.SandboxMode
	project   string
}

// parse checks the flags; every error is a usage error.
func (f *sessionFlags) parse() (*parsedSession, error) {
	var p parsedSession
	if (f.provider == "") != (f.model == "") {
		return nil, usageErrorf("give --provider and --model together, or neither to use the agent's default model")
	}
	if f.provider != "" {
		p.model = &penguinv1.ModelRef{Provider: f.provider, ModelId: f.model}
	}
	ws := f.workspace
	if ws == "" {
		ws = "."
	}
	abs, err := filepath.Abs(ws)
	if err != nil {
		return nil, usageErrorf("workspace: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
		return nil, usageErrorf("workspace %s is not a directory", abs)
	}
	p.workspace = abs
	p.project = f.project
	if p.approval, err = cli.ParseApprovalMode(f.approval); err != nil {
		return nil, &usageError{err: err}
	}
	if p.thinking, err = cli.ParseThinkingLevel(f.thinking); err != nil {
		return nil, &usageError{err: err}
	}
	switch f.sandbox {
	case "":
		p.sandbox = penguinv1.SandboxMode_SANDBOX_MODE_UNSPECIFIED
	case "none":
		p.sandbox = penguinv1.SandboxMode_SANDBOX_MODE_NONE
	case "workspace-write":
		p.sandbox = penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE
	case "read-only":
		p.sandbox = penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY
	default:
		return nil, usageErrorf("sandbox %q: want none, workspace-write or read-only", f.sandbox)
	}
	return &p, nil
}

func (p *parsedSession) createRequest() *penguinv1.CreateSessionRequest {
	return &penguinv1.CreateSessionRequest{
		Model: p.model, Workspace: p.workspace, ApprovalMode: p.approval, ThinkingLevel: p.thinking, SandboxMode: p.sandbox,
		ProjectId: p.project,
	}
}

// isTerminal reports whether f is a terminal.
func isTerminal(f *os.File) bool { return term.IsTerminal(f.Fd()) }

// useColor reports whether output to f may be styled: only on a terminal,
// and never when NO_COLOR is set.
func useColor(f *os.File) bool {
	if v, ok := os.LookupEnv("NO_COLOR"); ok && v != "" {
		return false
	}
	return isTerminal(f)
}

// statusError turns a gRPC status into an error that reads well on a
// terminal: the server's message and the code's name, without the
// "rpc error: code = … desc = …" wrapping.
func statusError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	return fmt.Errorf("%s (%s)", st.Message(), st.Code())
}

// errNoSession is returned when --resume finds nothing to resume.
var errNoSession = errors.New("there is no session to resume yet")
