// Package mcp connects an environment to MCP servers, over stdio or
// streamable HTTP, through the official Go SDK, and offers their tools as
// mcp__<server>__<tool>. Connecting has a budget and a failing server is
// skipped and reported, never fatal; every call has a timeout, so a hung
// server cannot hang a session.
package mcp

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/tool"
)

// DefaultConnectTimeout is the connect and discovery budget of a server
// that sets none.
const DefaultConnectTimeout = 10 * time.Second

var serverName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

// Options are shared by every server of an environment.
type Options struct {
	// Workspace is the default working directory of stdio servers.
	Workspace string
	// Limits are the defaults of every MCP tool; a server's timeout_ms
	// overrides the timeout.
	Limits tool.Limits
	// Logger receives connection problems; nil discards them.
	Logger *slog.Logger
	// ClientName and ClientVersion identify penguin to servers.
	ClientName, ClientVersion string
}

// Conn is one connected server.
type Conn struct {
	name    string
	session *sdk.ClientSession
	tracker command.Tracker // stdio only
	end     func()          // ends the context the session lives on
	closeMu sync.Once
}

// Close ends the session, and for a stdio server the process and anything
// it started.
func (c *Conn) Close() {
	c.closeMu.Do(func() {
		done := make(chan struct{})
		go func() {
			_ = c.session.Close()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
		}
		c.end()
		if c.tracker != nil {
			_ = c.tracker.Release()
		}
	})
}

// ConnectAll connects to every server in parallel. It returns the
// connections, the tools they offer and the per-server results; a server
// that fails is closed and reported, and the others are kept.
func ConnectAll(ctx context.Context, servers []*penguinv1.McpServer, opts Options) ([]*Conn, []tool.Spec, *penguinv1.McpConnectEnd) {
	end := &penguinv1.McpConnectEnd{Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED}
	if len(servers) == 0 {
		return nil, nil, end
	}
	type result struct {
		conn  *Conn
		tools []tool.Spec
		res   *penguinv1.McpServerConnectResult
	}
	results := make([]result, len(servers))
	var wg sync.WaitGroup
	seen := map[string]bool{}
	for i, s := range servers {
		if seen[s.GetName()] {
			results[i].res = failed(s, 0, fmt.Errorf("the server name %q is used twice", s.GetName()))
			continue
		}
		seen[s.GetName()] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			conn, tools, err := connect(ctx, s, opts)
			if err != nil {
				results[i].res = failed(s, time.Since(start), err)
				if opts.Logger != nil {
					opts.Logger.Warn("MCP server skipped", "server", s.GetName(), "error", err)
				}
				return
			}
			results[i] = result{conn: conn, tools: tools, res: &penguinv1.McpServerConnectResult{
				Server: s.GetName(), Transport: transportOf(s), Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED,
				DurationMs: time.Since(start).Milliseconds(), Tools: int32(len(tools)),
			}}
		}()
	}
	wg.Wait()
	var conns []*Conn
	var tools []tool.Spec
	for _, r := range results {
		end.Results = append(end.Results, r.res)
		if r.conn != nil {
			conns = append(conns, r.conn)
			tools = append(tools, r.tools...)
		} else {
			end.Status = penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED
		}
	}
	if ctx.Err() != nil {
		end.Status = penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_ABORTED
	}
	return conns, tools, end
}

func failed(s *penguinv1.McpServer, d time.Duration, err error) *penguinv1.McpServerConnectResult {
	return &penguinv1.McpServerConnectResult{
		Server: s.GetName(), Transport: transportOf(s), Status: penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED,
		DurationMs: d.Milliseconds(), Error: err.Error(),
	}
}

// transportOf returns the transport of s, inferring it when unset.
func transportOf(s *penguinv1.McpServer) string {
	switch {
	case s.GetTransport() != "":
		return s.GetTransport()
	case s.GetCommand() != "":
		return "stdio"
	case s.GetUrl() != "":
		return "http"
	}
	return ""
}

// connect connects to one server within its budget and lists its tools.
func connect(ctx context.Context, s *penguinv1.McpServer, opts Options) (*Conn, []tool.Spec, error) {
	if !serverName().MatchString(s.GetName()) {
		return nil, nil, fmt.Errorf("invalid server name %q: use letters, digits, \"_\" and \"-\"", s.GetName())
	}
	budget := DefaultConnectTimeout
	if s.GetConnectTimeoutMs() > 0 {
		budget = time.Duration(s.GetConnectTimeoutMs()) * time.Millisecond
	}
	// The session lives on a context of its own, ended by Close: the sse
	// transport keeps its event stream on the context it connected with.
	// The connect budget and the caller's cancellation end it only until
	// the tools are listed.
	cctx, end := context.WithCancelCause(context.WithoutCancel(ctx))
	budgetTimer := time.AfterFunc(budget, func() { end(errConnectBudget) })
	stopCallerCancel := context.AfterFunc(ctx, func() { end(context.Cause(ctx)) })
	connected := false
	defer func() {
		if !connected {
			budgetTimer.Stop()
			stopCallerCancel()
			end(nil)
		}
	}()

	conn := &Conn{name: s.GetName(), end: func() { end(nil) }}
	var transport sdk.Transport
	var stderr *tailBuffer
	switch transportOf(s) {
	case "stdio":
		if s.GetCommand() == "" {
			return nil, nil, errors.New("a stdio server needs a command")
		}
		cmd := exec.Command(s.GetCommand(), s.GetArgs()...)
		cmd.Dir = s.GetCwd()
		if cmd.Dir == "" {
			cmd.Dir = opts.Workspace
		}
		cmd.Env = stdioEnv(s.GetEnv())
		stderr = &tailBuffer{max: 2048}
		cmd.Stderr = stderr
		// A session of its own, so that closing ends what it started.
		tracker, err := command.Unconfined().Launch(cmd)
		if err != nil {
			return nil, nil, fmt.Errorf("preparing the server process: %w", err)
		}
		conn.tracker = tracker
		transport = &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	case "http":
		if s.GetUrl() == "" {
			return nil, nil, errors.New("an http server needs a url")
		}
		transport = &sdk.StreamableClientTransport{
			Endpoint:             s.GetUrl(),
			HTTPClient:           &http.Client{Transport: headerTransport{headers: s.GetHeaders(), base: http.DefaultTransport}},
			DisableStandaloneSSE: true,
			MaxRetries:           -1,
		}
	case "sse":
		// The HTTP+SSE transport of the 2024-11-05 protocol, which servers
		// written before streamable HTTP still speak.
		if s.GetUrl() == "" {
			return nil, nil, errors.New("an sse server needs a url")
		}
		transport = &sdk.SSEClientTransport{
			Endpoint:   s.GetUrl(),
			HTTPClient: &http.Client{Transport: headerTransport{headers: s.GetHeaders(), base: http.DefaultTransport}},
		}
	default:
		return nil, nil, fmt.Errorf("unsupported transport %q: use stdio, http or sse", s.GetTransport())
	}

	client := sdk.NewClient(&sdk.Implementation{Name: opts.ClientName, Version: opts.ClientVersion}, nil)
	session, err := client.Connect(cctx, transport, nil)
	if err != nil {
		if conn.tracker != nil {
			_ = conn.tracker.Release()
		}
		return nil, nil, describe("connecting", err, cctx, budget, stderr)
	}
	conn.session = session
	var tools []tool.Spec
	limits := opts.Limits
	if s.GetTimeoutMs() > 0 {
		limits.Timeout = time.Duration(s.GetTimeoutMs()) * time.Millisecond
	}
	if s.MaxOutputLength != nil {
		limits.MaxOutput = int(max(s.GetMaxOutputLength(), 0))
	}
	for t, err := range session.Tools(cctx, nil) {
		if err != nil {
			conn.Close()
			return nil, nil, describe("listing tools", err, cctx, budget, stderr)
		}
		tools = append(tools, tool.Spec{Tool: newTool(s, t, session), Limits: limits})
	}
	fired, cancelled := !budgetTimer.Stop(), !stopCallerCancel()
	if fired || cancelled {
		conn.Close()
		return nil, nil, describe("listing tools", cctx.Err(), cctx, budget, stderr)
	}
	connected = true
	return conn, tools, nil
}

// errConnectBudget ends a connection attempt that ran out of its budget.
var errConnectBudget = errors.New("the connect budget ran out")

// describe explains a connect failure, with the server's last stderr lines.
func describe(step string, err error, ctx context.Context, budget time.Duration, stderr *tailBuffer) error {
	msg := fmt.Sprintf("%s: %v", step, err)
	if errors.Is(context.Cause(ctx), errConnectBudget) {
		msg = fmt.Sprintf("%s: no answer within the connect budget of %s", step, budget)
	}
	if stderr != nil {
		if tail := strings.TrimSpace(stderr.String()); tail != "" {
			msg += "; server stderr: " + tail
		}
	}
	return errors.New(msg)
}

// stdioEnv is the environment of a stdio server: a few safe variables
// inherited from this process plus the server's own. The vault is not
// injected.
func stdioEnv(extra map[string]string) []string {
	var env []string
	for _, k := range []string{"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "TMPDIR", "TZ"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// headerTransport adds configured headers to every request.
type headerTransport struct {
	headers map[string]string
	base    http.RoundTripper
}

func (h headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	return h.base.RoundTrip(r)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// mcpTool is one tool of a server.
type mcpTool struct {
	def     *penguinv1.ToolDefinition
	perm    penguinv1.Permission
	remote  string
	session *sdk.ClientSession
}

var toolNameChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9_-]`) })

func newTool(s *penguinv1.McpServer, t *sdk.Tool, session *sdk.ClientSession) *mcpTool {
	params := `{"type":"object"}`
	if t.InputSchema != nil {
		if b, err := json.Marshal(t.InputSchema); err == nil {
			params = string(b)
		}
	}
	perm := s.GetPermission()
	if perm == penguinv1.Permission_PERMISSION_UNSPECIFIED {
		perm = penguinv1.Permission_PERMISSION_RW
		if t.Annotations != nil && t.Annotations.ReadOnlyHint {
			perm = penguinv1.Permission_PERMISSION_R
		}
	}
	return &mcpTool{
		def: &penguinv1.ToolDefinition{
			Name:        "mcp__" + s.GetName() + "__" + toolNameChars().ReplaceAllString(t.Name, "_"),
			Description: t.Description,
			Parameters:  params,
		},
		perm:    perm,
		remote:  t.Name,
		session: session,
	}
}

func (t *mcpTool) Definition() *penguinv1.ToolDefinition { return t.def }
func (t *mcpTool) Permission() penguinv1.Permission      { return t.perm }

func (t *mcpTool) Run(ctx context.Context, args string, out tool.Output) (tool.Result, error) {
	var obj map[string]json.RawMessage
	if err := tool.DecodeArgs(args, &obj); err != nil {
		return tool.Result{}, err
	}
	res, err := t.session.CallTool(ctx, &sdk.CallToolParams{Name: t.remote, Arguments: obj})
	if err != nil {
		if ctx.Err() != nil {
			return tool.Result{}, ctx.Err()
		}
		return tool.Result{}, fmt.Errorf("the MCP server failed the call: %w", err)
	}
	var images []string
	var parts []string
	for _, c := range res.Content {
		switch c := c.(type) {
		case *sdk.TextContent:
			parts = append(parts, c.Text)
		case *sdk.ImageContent:
			images = append(images, "data:"+c.MIMEType+";base64,"+base64.StdEncoding.EncodeToString(c.Data))
		case *sdk.AudioContent:
			parts = append(parts, fmt.Sprintf("[audio content: %s, %d bytes]", c.MIMEType, len(c.Data)))
		case *sdk.EmbeddedResource:
			if r := c.Resource; r != nil && r.Text != "" {
				parts = append(parts, r.Text)
			} else if r != nil {
				parts = append(parts, fmt.Sprintf("[binary resource %s: %s, %d bytes]", r.URI, r.MIMEType, len(r.Blob)))
			}
		case *sdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s]", c.URI))
		default:
			parts = append(parts, fmt.Sprintf("[unsupported content %T]", c))
		}
	}
	if len(res.Content) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			parts = append(parts, string(b))
		}
	}
	_, _ = out.WriteString(strings.Join(parts, "\n"))
	r := tool.Result{Images: images}
	if res.IsError {
		r.StopReason = penguinv1.StopReason_STOP_REASON_FAILED
	}
	return r, nil
}
