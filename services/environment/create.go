package environment

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"

	"github.com/google/uuid"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cmdpolicy"
	"github.com/penguin-agent/penguin/services/environment/builtin"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/custom"
	"github.com/penguin-agent/penguin/services/environment/framing"
	"github.com/penguin-agent/penguin/services/environment/mcp"
	"github.com/penguin-agent/penguin/services/environment/redact"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

var labelChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`) })

// createSpec is a checked CreateEnvironment request.
type createSpec struct {
	req         *penguinv1.CreateEnvironmentRequest
	id          string
	scratchName string // the directory of the environment's archives
	workspace   string
	policy      *cmdpolicy.Policy
	sandbox     sandbox.Policy
}

// create builds an environment in named phases: the request is checked,
// the environment's own state made, what runs its commands readied (it
// starts with the first command), its tools assembled. A failure after
// the first phase disposes what was made.
func (s *Service) create(ctx context.Context, req *penguinv1.CreateEnvironmentRequest) (_ *Environment, err error) {
	spec, err := s.checkRequest(req)
	if err != nil {
		return nil, err
	}
	e, err := s.newEnvironment(spec)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.dispose()
		}
	}()
	s.prepareCommands(e, spec)
	if err := s.assembleTools(ctx, e, spec); err != nil {
		return nil, err
	}
	return e, nil
}

// checkRequest validates everything the caller must fix, and that the
// host can enforce the sandbox, before anything is made.
func (s *Service) checkRequest(req *penguinv1.CreateEnvironmentRequest) (createSpec, error) {
	spec := createSpec{req: req, id: uuid.NewString()}
	var err error
	if spec.workspace, err = s.resolveWorkspace(req.GetWorkspace(), req.GetWorkspaceMustExist()); err != nil {
		return spec, err
	}
	if spec.policy, err = cmdpolicy.Compile(req.GetCommandPolicy()); err != nil {
		return spec, invalid("%v", err)
	}
	for name := range req.GetVault() {
		if !vaultName().MatchString(name) {
			return spec, invalid("vault name %q is not a valid environment variable name", name)
		}
	}
	tools := req.GetTools()
	if tools.GetNoBuiltins() && len(tools.GetBuiltin()) > 0 {
		return spec, invalid("tools.no_builtins is set but tools.builtin lists %d tools: choose one", len(tools.GetBuiltin()))
	}
	for _, m := range tools.GetMcpServers() {
		if m.GetName() == "" {
			return spec, invalid("an MCP server has no name")
		}
	}
	spec.scratchName = spec.id
	if label := req.GetLabel(); labelChars().MatchString(label) && label != "." && label != ".." {
		spec.scratchName = label
	}
	if spec.sandbox, err = s.sandboxPolicy(req, spec.workspace); err != nil {
		return spec, err
	}
	if err := s.opts.CheckSandbox(spec.sandbox); err != nil {
		if errors.Is(err, sandbox.ErrUnsupported) {
			return spec, err
		}
		return spec, invalid("sandbox: %v", err)
	}
	return spec, nil
}

// newEnvironment makes the environment's own state: its workspace
// handle, its output framing, and how its archive directory is made.
func (s *Service) newEnvironment(spec createSpec) (*Environment, error) {
	archive := &archiveDir{scratch: s.scratch, name: spec.scratchName + "/truncated-tool-output"}
	archivePath := filepath.Join(s.scratch.Name(), filepath.FromSlash(archive.name))
	root, err := workspace.NewResolved(spec.workspace, workspace.Readable{Dir: archivePath, Open: func() (*os.Root, error) { return archive.open(false) }})
	if err != nil {
		return nil, err
	}
	envCtx, cancel := context.WithCancel(context.Background())
	e := &Environment{
		id:        spec.id,
		label:     spec.req.GetLabel(),
		workspace: spec.workspace,
		archive:   archive,
		root:      root,
		policy:    spec.policy,
		vault:     redact.New(spec.req.GetVault()),
		notices:   newNotices(),
		log:       s.log.With("environment", spec.id),
		tools:     make(map[string]tool.Spec, toolsHint),
		params:    make(map[string]tool.Params, toolsHint),
		order:     make([]string, 0, toolsHint),
		ctx:       envCtx,
		cancel:    cancel,
		idle:      make(chan struct{}),
		disposed:  make(chan struct{}),
		endStore:  s.stores.hold(spec.workspace),
	}
	ceiling := max(s.opts.OutputCeiling, 0)
	archives := framing.NewArchives(archivePath, func() (*os.Root, error) { return archive.open(true) }, s.opts.ScratchLimit)
	e.framing = framing.Options{Ceiling: ceiling, Vault: e.vault, Archives: archives, Grace: s.opts.Grace, Logger: e.log}
	return e, nil
}

// toolsHint is the room an environment's tool tables are made with: the
// builtins and a few more, so that they are not grown (twice, as the
// builtins are added) at every CreateEnvironment.
const toolsHint = 16

// archiveDir is an environment's directory of truncated outputs,
// <scratch>/<label or id>/truncated-tool-output. It is made at the first
// output archived, not with the environment: most environments never
// truncate one, and making it was a quarter of CreateEnvironment's time
// (and left an empty directory per environment behind). It is made and
// opened beneath the scratch directory's handle, so no link planted on
// its path since the service started can move it.
type archiveDir struct {
	scratch *os.Root
	name    string // slash-separated, beneath scratch

	mu     sync.Mutex
	root   *os.Root // once opened
	closed bool
}

// open returns the directory's handle, making the directory first when
// create is set. Without it, a directory not made yet is an error that
// wraps fs.ErrNotExist.
func (a *archiveDir) open(create bool) (*os.Root, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return nil, os.ErrClosed
	case a.root != nil:
		return a.root, nil
	}
	if create {
		if err := a.scratch.MkdirAll(a.name, 0o700); err != nil {
			return nil, fmt.Errorf("archive directory: %w", err)
		}
	}
	root, err := a.scratch.OpenRoot(a.name)
	if err != nil {
		return nil, fmt.Errorf("archive directory: %w", err)
	}
	a.root = root
	return root, nil
}

// close closes the handle, if it was opened; later opens fail.
func (a *archiveDir) close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.closed = true
	if a.root != nil {
		a.root.Close()
	}
}

// prepareCommands readies what runs the environment's commands without
// starting it: the sandbox and the command manager (with its shell
// snapshot) start at the first command (see commandRunner), and the
// commands' environment is made then too (a map and a sorted copy of the
// service's whole environment, some twenty allocations at every
// CreateEnvironment before).
func (s *Service) prepareCommands(e *Environment, spec createSpec) {
	vault, policy := spec.req.GetVault(), spec.sandbox
	e.commandEnv = sync.OnceValues(func() ([]string, []string) {
		return CommandEnv(s.opts.Env, vault, sandboxEnv(policy))
	})
	e.commands = &commandRunner{
		policy:   spec.sandbox,
		byGroup:  s.opts.NoCgroups,
		mayWrite: s.writes.begin,
		newSandbox: func() (*sandbox.Env, error) {
			sb, err := sandbox.NewEnv(spec.sandbox, s.opts.Self)
			if err != nil {
				// It fails once, for this call and every later one.
				e.log.Error("the environment's sandbox could not be started; its commands fail", "error", err)
			}
			return sb, err
		},
		newManager: func(sb *sandbox.Env, launcher command.Launcher) (*command.Manager, error) {
			env, fixed := e.commandEnv()
			return command.NewManager(command.Options{
				Shell:            s.opts.Shell,
				Env:              env,
				Fixed:            fixed,
				Dir:              spec.workspace,
				LoginShell:       spec.req.GetLoginShell(),
				ProfileTimeout:   s.opts.ProfileTimeout,
				Launcher:         launcher,
				Limits:           sb,
				Max:              s.opts.MaxSessions,
				TailSlack:        e.vault.MaxHeld(),
				OnBackgroundDone: e.backgroundDone,
			})
		},
	}
}

// sandboxEnv is what the sandbox sets in every command's environment: the
// private /tmp, and the proxy where there is one.
func sandboxEnv(p sandbox.Policy) map[string]string {
	extra := map[string]string{}
	if p.Mode != sandbox.None {
		extra["TMPDIR"] = "/tmp"
	}
	if p.Network == sandbox.NetworkProxy {
		proxy := fmt.Sprintf("http://127.0.0.1:%d", sandbox.ProxyPort)
		for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} {
			extra[k] = proxy
		}
		extra["NO_PROXY"], extra["no_proxy"] = "localhost,127.0.0.1,::1", "localhost,127.0.0.1,::1"
	}
	return extra
}

// assembleTools adds the builtin, custom and MCP tools.
func (s *Service) assembleTools(ctx context.Context, e *Environment, spec createSpec) error {
	tools := spec.req.GetTools()
	if !tools.GetNoBuiltins() {
		if err := e.assembleBuiltins(tools.GetBuiltin(), builtin.Tools(builtin.Deps{
			Root: e.root, Commands: e.commands, ReadOnly: spec.sandbox.Mode == sandbox.ReadOnly,
			HTTP: s.fetchClient(spec.sandbox.Network == sandbox.NetworkNone),
		})); err != nil {
			return err
		}
	}
	if specs := tools.GetCustom(); len(specs) > 0 {
		env, _ := e.commandEnv()
		if err := e.assembleCustom(specs, custom.Options{Shell: s.opts.Shell, Dir: spec.workspace, Env: env, Launcher: e.commands}); err != nil {
			return err
		}
	}
	conns, mcpTools, end := mcp.ConnectAll(ctx, tools.GetMcpServers(), mcp.Options{
		Workspace:     spec.workspace,
		Limits:        tool.Limits{Timeout: tool.DefaultTimeout, MaxOutput: tool.DefaultMaxOutput},
		Logger:        e.log,
		ClientName:    "penguin",
		ClientVersion: s.opts.Version,
	})
	e.mcpConns, e.mcpEnd = conns, end
	if len(conns) > 0 {
		// An MCP server is a process of its own, which may write to the
		// workspace whenever it likes, until the environment ends it.
		e.endWrites = s.writes.begin()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for _, t := range mcpTools {
		if err := e.add(t); err != nil {
			e.log.Warn("MCP tool skipped", "error", err)
		}
	}
	return nil
}

// fetchClient is the shared HTTP client of read_image's URL fetches, the
// one without network access when noNetwork.
func (s *Service) fetchClient(noNetwork bool) *http.Client {
	if noNetwork {
		return s.fetchClients[1]()
	}
	return s.fetchClients[0]()
}

var vaultName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

// modeToProto and networkToProto spell the applied sandbox in the
// response.
var (
	modeToProto = map[sandbox.Mode]penguinv1.SandboxMode{
		sandbox.None:           penguinv1.SandboxMode_SANDBOX_MODE_NONE,
		sandbox.WorkspaceWrite: penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE,
		sandbox.ReadOnly:       penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY,
	}
	networkToProto = map[sandbox.Network]penguinv1.NetworkAccess{
		sandbox.NetworkHost:  penguinv1.NetworkAccess_NETWORK_ACCESS_HOST,
		sandbox.NetworkNone:  penguinv1.NetworkAccess_NETWORK_ACCESS_NONE,
		sandbox.NetworkProxy: penguinv1.NetworkAccess_NETWORK_ACCESS_PROXY,
	}
)

// sandboxPolicy turns the request's sandbox settings into a policy, the
// service's defaults filling in what it leaves unspecified.
func (s *Service) sandboxPolicy(req *penguinv1.CreateEnvironmentRequest, ws string) (sandbox.Policy, error) {
	p := sandbox.Policy{Workspace: ws, User: s.opts.SandboxUser, Limits: s.opts.Limits, WritablePaths: s.opts.WritablePaths, HidePaths: s.opts.HidePaths, Siblings: s.root}
	switch req.GetSandboxMode() {
	case penguinv1.SandboxMode_SANDBOX_MODE_UNSPECIFIED:
		p.Mode = s.defaultMode
	case penguinv1.SandboxMode_SANDBOX_MODE_NONE:
		p.Mode = sandbox.None
	case penguinv1.SandboxMode_SANDBOX_MODE_WORKSPACE_WRITE:
		p.Mode = sandbox.WorkspaceWrite
	case penguinv1.SandboxMode_SANDBOX_MODE_READ_ONLY:
		p.Mode = sandbox.ReadOnly
	default:
		return p, invalid("unknown sandbox mode %v", req.GetSandboxMode())
	}
	if p.Mode == sandbox.None && s.opts.SandboxRequired {
		return p, errUnconfinedRefused
	}
	network := req.GetNetwork()
	if req.GetNoNetwork() {
		if network != penguinv1.NetworkAccess_NETWORK_ACCESS_UNSPECIFIED && network != penguinv1.NetworkAccess_NETWORK_ACCESS_NONE {
			return p, invalid("no_network is set, but network asks for %v: set one of them", network)
		}
		network = penguinv1.NetworkAccess_NETWORK_ACCESS_NONE
	}
	switch network {
	case penguinv1.NetworkAccess_NETWORK_ACCESS_UNSPECIFIED:
		p.Network = s.defaultNetwork
		if p.Mode == sandbox.None {
			p.Network = sandbox.NetworkHost
		}
	case penguinv1.NetworkAccess_NETWORK_ACCESS_NONE:
		p.Network = sandbox.NetworkNone
	case penguinv1.NetworkAccess_NETWORK_ACCESS_PROXY:
		p.Network = sandbox.NetworkProxy
	case penguinv1.NetworkAccess_NETWORK_ACCESS_HOST:
		if p.Mode != sandbox.None {
			return p, invalid("network host needs sandbox mode none: a confined command on the host's network would reach every service on its loopback, this one included (use network proxy for outbound access)")
		}
		p.Network = sandbox.NetworkHost
	default:
		return p, invalid("unknown network access %v", network)
	}
	if p.Network == sandbox.NetworkProxy {
		socket, err := s.proxy.socket()
		if err != nil {
			return p, fmt.Errorf("starting the egress proxy: %w", err)
		}
		p.ProxySocket = socket
	}
	return p, nil
}
