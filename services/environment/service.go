package environment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cmdpolicy"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/environment/builtin"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/custom"
	"github.com/penguin-agent/penguin/services/environment/egress"
	"github.com/penguin-agent/penguin/services/environment/framing"
	"github.com/penguin-agent/penguin/services/environment/mcp"
	"github.com/penguin-agent/penguin/services/environment/redact"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// DefaultOutputCeiling caps a tool's output, in characters, even when its
// own cap is turned off: the complete output is one message, and a runaway
// command must not exhaust memory or message size limits.
const DefaultOutputCeiling = 4 << 20

// DefaultScratchLimit is the default of Options.ScratchLimit: room for
// about thirty of the largest archives (8 MiB each).
const DefaultScratchLimit = 256 << 20

// DefaultScratchDir is where archives go when Options.ScratchDir is empty:
// the user's cache directory ($XDG_CACHE_HOME/penguin/scratch), or, when
// that lies inside root (a root at the home directory), a private
// directory in the system's temporary directory. A root of "/" keeps the
// cache directory: every path lies inside it, and the check that no
// workspace contains the scratch directory still holds.
func DefaultScratchDir(root string) string {
	var candidates []string
	if cache, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(cache, "penguin", "scratch"))
	}
	candidates = append(candidates, filepath.Join(os.TempDir(), fmt.Sprintf("penguin-%d", os.Geteuid()), "scratch"))
	for _, c := range candidates {
		if !within(resolveExisting(c), root) {
			return c
		}
	}
	return candidates[0]
}

// resolveExisting resolves symbolic links in the longest existing prefix
// of the absolute path p and appends the rest.
func resolveExisting(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// openScratch creates the scratch directory when missing and opens it as
// a handle. A directory that another user owns, or that others may write
// to, is refused: they could read the archives or plant links in it.
func openScratch(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("scratch directory %s belongs to uid %d, not to this service (uid %d)", real, st.Uid, os.Geteuid())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("scratch directory %s is writable by others (mode %v); make it private (chmod 700)", real, info.Mode().Perm())
	}
	return os.OpenRoot(real)
}

// Options configure a Service.
type Options struct {
	// Root is the directory every workspace must lie under. It is
	// required.
	Root string
	// ScratchDir holds the environments' archives of truncated output, one
	// directory per environment label. It must lie outside every
	// workspace (a workspace that contains it is refused), and it should
	// not be writable by commands. Empty means DefaultScratchDir(Root).
	ScratchDir string
	// ScratchLimit bounds, in bytes, the disk used by the archives of
	// one scratch directory (one label); beyond it the oldest archives
	// are removed first. Zero means DefaultScratchLimit.
	ScratchLimit int64
	// Env is the base environment of commands; nil means this process's.
	// Penguin's own variables and provider credentials are removed from
	// it (see CommandEnv).
	Env []string
	// Shell runs commands; empty means bash.
	Shell string
	// Self is the sandbox trampoline, started with "sandbox-exec" as its
	// first argument; empty means sandbox.Trampoline() (penguin-sandbox
	// beside this binary, else this binary itself).
	Self string
	// DefaultSandbox is the sandbox mode of environments that do not ask
	// for one; empty means workspace-write where the host can enforce it
	// and none where it cannot (New logs which, and why).
	DefaultSandbox string
	// DefaultNetwork is the network access of confined environments that
	// do not ask for one: "none" (empty) or "proxy".
	DefaultNetwork string
	// SandboxUser is who confined commands run as; the zero value means
	// sandbox.DefaultIdentity (nobody).
	SandboxUser sandbox.Identity
	// Limits bound each environment's commands together; zero fields
	// mean sandbox.DefaultLimits.
	Limits sandbox.Limits
	// WritablePaths are directories confined commands may write besides
	// the workspace and the environment's own /tmp (a shared cache, say);
	// their permissions must let SandboxUser write.
	WritablePaths []string
	// HidePaths are files confined commands see empty, such as the
	// service's auth token file.
	HidePaths []string
	// ProfileTimeout bounds the login shell that takes each environment's
	// shell snapshot; zero means command.DefaultProfileTimeout.
	ProfileTimeout time.Duration
	// MaxSessions caps the command sessions per environment; zero means
	// command.MaxSessions.
	MaxSessions int
	// OutputCeiling is the hard cap on one output in characters; zero
	// means DefaultOutputCeiling, negative means none.
	OutputCeiling int
	// Grace is how long a cancelled tool may take to return; zero means
	// framing.DefaultGrace.
	Grace time.Duration
	// NoCgroups tracks commands by process group and session only, never
	// by a per-command cgroup: a command starts faster (no cgroup to
	// create and clone into, about 2 ms on a cgroup-v2 host), but a daemon
	// that double-forked out of its session survives a kill.
	NoCgroups bool
	// CheckSandbox tells whether the host can enforce a sandbox policy;
	// nil means sandbox.Check.
	CheckSandbox func(sandbox.Policy) error
	// Logger receives the service's events; nil discards them.
	Logger *slog.Logger
	// Version identifies penguin to MCP servers.
	Version string
	// Advertise is the address at which callers must reach the
	// environments of this replica, returned by CreateEnvironment: with
	// several replicas behind one name, an environment lives on the
	// replica that created it, and the engine binds its session to this
	// address. Empty means the caller's address is already the right one
	// (a single replica).
	Advertise string
	// FetchAllow lists the internal address prefixes (loopback, private,
	// link-local, ...) that tools fetching URLs for a model (read_image)
	// may reach all the same; by default they reach only public
	// addresses, and nothing in environments without network.
	FetchAllow []netip.Prefix
	// Registerer receives the service's metrics (tool runs, environments,
	// command sessions); nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Service implements penguinv1.EnvironmentServiceServer. Its handlers are
// thin: they check the request, find the environment and translate errors
// into status codes.
type Service struct {
	penguinv1.UnimplementedEnvironmentServiceServer

	opts    Options
	root    string   // absolute, symbolic links resolved
	scratch *os.Root // opts.ScratchDir, resolved
	log     *slog.Logger

	// defaultMode and defaultNetwork resolve what requests leave
	// unspecified.
	defaultMode    sandbox.Mode
	defaultNetwork sandbox.Network
	// proxy serves the environments with proxied network access; it
	// starts with the first of them.
	proxy *egressProxy

	metrics *metrics

	mu   sync.Mutex
	envs map[string]*Environment
	// closing is set by Close, before it disposes the environments, so
	// that the calls it cuts end as "this replica is going" (see
	// ExecuteTool) rather than as commands that someone killed.
	closing atomic.Bool
}

// New returns a Service over opts.Root, creating the root when missing.
func New(opts Options) (*Service, error) {
	if opts.Root == "" {
		return nil, errors.New("environment service: a root directory is required")
	}
	abs, err := filepath.Abs(opts.Root)
	if err != nil {
		return nil, fmt.Errorf("environment service root: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("environment service root: %w", err)
	}
	root, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("environment service root: %w", err)
	}
	if opts.ScratchDir == "" {
		opts.ScratchDir = DefaultScratchDir(root)
	}
	if opts.ScratchDir, err = filepath.Abs(opts.ScratchDir); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	if opts.ScratchLimit == 0 {
		opts.ScratchLimit = DefaultScratchLimit
	}
	if opts.ScratchLimit < 0 {
		return nil, fmt.Errorf("scratch limit %d is negative", opts.ScratchLimit)
	}
	scratch, err := openScratch(opts.ScratchDir)
	if err != nil {
		return nil, err
	}
	opts.ScratchDir = scratch.Name()
	if opts.Env == nil {
		opts.Env = os.Environ()
	}
	log := logger.OrDiscard(opts.Logger)
	if opts.Self == "" {
		var why string
		opts.Self, why = sandbox.Trampoline()
		log.Debug("the sandbox trampoline", "path", opts.Self, "why", why)
	}
	if opts.OutputCeiling == 0 {
		opts.OutputCeiling = DefaultOutputCeiling
	}
	if opts.CheckSandbox == nil {
		opts.CheckSandbox = sandbox.Check
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Service{opts: opts, root: root, scratch: scratch, log: log, envs: map[string]*Environment{}, proxy: &egressProxy{allow: opts.FetchAllow}}
	if err := s.resolveDefaults(); err != nil {
		scratch.Close()
		return nil, err
	}
	if s.metrics, err = newMetrics(s, opts.Registerer); err != nil {
		scratch.Close()
		return nil, err
	}
	return s, nil
}

// resolveDefaults works out the sandbox of environments that ask for
// none: workspace-write without network where the host can enforce it.
// Where it cannot, the default is mode none, and the log says what is
// missing; a mode asked for explicitly is never downgraded. A confined
// default given explicitly (--sandbox-default) that the host cannot
// enforce stops the service at start, naming what is missing.
func (s *Service) resolveDefaults() error {
	var err error
	s.defaultNetwork = sandbox.NetworkNone
	if s.opts.DefaultNetwork != "" {
		if s.defaultNetwork, err = sandbox.ParseNetwork(s.opts.DefaultNetwork); err != nil {
			return err
		}
		if s.defaultNetwork == sandbox.NetworkHost {
			return errors.New("default network host: confined commands never share the host's network")
		}
	}
	probe := sandbox.Policy{Mode: sandbox.WorkspaceWrite, Workspace: s.root, Network: sandbox.NetworkNone, User: s.opts.SandboxUser, Limits: s.opts.Limits}
	confinable := s.opts.CheckSandbox(probe)
	if s.opts.DefaultSandbox == "" {
		s.defaultMode = sandbox.WorkspaceWrite
		if confinable != nil {
			s.defaultMode = sandbox.None
			s.log.Warn("environments that do not ask for a sandbox run unconfined: this host cannot enforce workspace-write", "reason", confinable)
		}
		return nil
	}
	if s.defaultMode, err = sandbox.ParseMode(s.opts.DefaultSandbox); err != nil {
		return err
	}
	if s.defaultMode == sandbox.None {
		if confinable != nil {
			s.log.Warn("environments run unconfined unless they ask for a sandbox, and those that ask are refused: this host cannot enforce workspace-write", "reason", confinable)
		}
		return nil
	}
	// A confined default that cannot hold is refused here, at start,
	// rather than in every CreateEnvironment that relies on it.
	probe.Mode = s.defaultMode
	if err := s.opts.CheckSandbox(probe); err != nil {
		return fmt.Errorf("default sandbox mode %s: %w", s.defaultMode, err)
	}
	return nil
}

// snapshot returns the environments the service holds now.
func (s *Service) snapshot() []*Environment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Environment, 0, len(s.envs))
	for _, e := range s.envs {
		out = append(out, e)
	}
	return out
}

// Root returns the service's root directory.
func (s *Service) Root() string { return s.root }

// get finds an environment.
func (s *Service) get(id string) (*Environment, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.envs[id]
	return e, ok
}

func notFound(id string) error {
	return status.Errorf(codes.NotFound, "no environment %q on this replica (it was disposed, or never created here)", id)
}

// toStatus maps an internal error to a status at the RPC boundary.
func toStatus(err error) error {
	switch {
	case errors.Is(err, errInvalid):
		return status.Error(codes.InvalidArgument, strings.TrimPrefix(err.Error(), errInvalid.Error()+": "))
	case errors.Is(err, sandbox.ErrUnsupported):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	default:
		return status.Error(codes.Internal, "the environment could not be created; see the service log")
	}
}

var labelChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`) })

// CreateEnvironment implements penguinv1.EnvironmentServiceServer.
func (s *Service) CreateEnvironment(ctx context.Context, req *penguinv1.CreateEnvironmentRequest) (*penguinv1.CreateEnvironmentResponse, error) {
	if s.closing.Load() {
		return nil, errShuttingDown
	}
	e, err := s.create(ctx, req)
	if err != nil {
		if !errors.Is(err, errInvalid) && !errors.Is(err, sandbox.ErrUnsupported) {
			s.log.Error("creating an environment failed", "workspace", req.GetWorkspace(), "error", err)
		}
		return nil, toStatus(err)
	}
	s.mu.Lock()
	s.envs[e.id] = e
	s.mu.Unlock()
	s.metrics.created.Inc()
	p := e.commands.policy
	s.log.Info("environment created", "environment", e.id, "label", e.label, "workspace", e.workspace, "tools", len(e.order), "sandbox", p.Mode, "network", p.Network)
	return &penguinv1.CreateEnvironmentResponse{
		EnvironmentId: e.id,
		Address:       s.opts.Advertise,
		Tools:         e.toolInfos(),
		Mcp:           e.mcpEnd,
		Workspace:     e.workspace,
		SandboxMode:   modeToProto[p.Mode],
		Network:       networkToProto[p.Network],
	}, nil
}

// resolveWorkspace makes the requested workspace absolute, refuses one
// outside the root, inside the scratch area or containing it, and creates
// it beneath the root (given to the root's owner when the service runs as
// root, see workspace.MkdirAll), unless it must exist already.
func (s *Service) resolveWorkspace(requested string, mustExist bool) (string, error) {
	p, err := s.workspacePath(requested)
	if err != nil {
		return "", err
	}
	if mustExist {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return "", invalid("workspace %q does not exist; create the directory first, or check the path", requested)
		}
	}
	rel, err := filepath.Rel(s.root, p)
	if err != nil {
		return "", invalid("workspace %q: %v", requested, err)
	}
	if err := workspace.MkdirAll(s.root, filepath.ToSlash(rel)); err != nil {
		return "", invalid("workspace %q cannot be created: %v", requested, err)
	}
	return s.realWorkspace(requested, p)
}

// workspacePath makes the requested workspace absolute and refuses one
// whose path lies outside the root.
func (s *Service) workspacePath(requested string) (string, error) {
	if strings.TrimSpace(requested) == "" {
		return "", invalid("a workspace directory is required")
	}
	p := requested
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.root, p)
	}
	p = filepath.Clean(p)
	if !within(p, s.root) {
		return "", invalid("workspace %q is outside the service root %s", requested, s.root)
	}
	return p, nil
}

// realWorkspace resolves the links of the existing workspace directory p
// and refuses one that leads outside the root, inside the scratch area or
// around it.
func (s *Service) realWorkspace(requested, p string) (string, error) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", invalid("workspace %q: %v", requested, err)
	}
	if !within(real, s.root) {
		return "", invalid("workspace %q leads through a symbolic link to %s, outside the service root %s", requested, real, s.root)
	}
	if info, err := os.Stat(real); err != nil || !info.IsDir() {
		return "", invalid("workspace %q is not a directory", requested)
	}
	if within(real, s.opts.ScratchDir) {
		return "", invalid("workspace %q lies inside the service's scratch area", requested)
	}
	if within(s.opts.ScratchDir, real) {
		return "", invalid("workspace %q contains the service's scratch area %s, where the archives of truncated output are kept; "+
			"choose a workspace beside it, or start the service with its scratch directory elsewhere", requested, s.opts.ScratchDir)
	}
	return real, nil
}

func within(p, dir string) bool {
	return p == dir || dir == "/" || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

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

// newEnvironment makes the environment's own state: its archive
// directory, its workspace handle and its output framing.
func (s *Service) newEnvironment(spec createSpec) (*Environment, error) {
	archiveName := spec.scratchName + "/truncated-tool-output"
	if err := s.scratch.MkdirAll(archiveName, 0o700); err != nil {
		return nil, fmt.Errorf("archive directory: %w", err)
	}
	archive, err := s.scratch.OpenRoot(archiveName)
	if err != nil {
		return nil, fmt.Errorf("archive directory: %w", err)
	}
	root, err := workspace.New(spec.workspace, archive)
	if err != nil {
		archive.Close()
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
		tools:     map[string]tool.Spec{},
		params:    map[string]tool.Params{},
		ctx:       envCtx,
		cancel:    cancel,
		idle:      make(chan struct{}),
		disposed:  make(chan struct{}),
	}
	ceiling := max(s.opts.OutputCeiling, 0)
	e.framing = framing.Options{Ceiling: ceiling, Vault: e.vault, Archives: framing.NewArchives(archive, s.opts.ScratchLimit), Grace: s.opts.Grace, Logger: e.log}
	return e, nil
}

// prepareCommands readies what runs the environment's commands without
// starting it: the sandbox and the command manager (with its shell
// snapshot) start at the first command (see commandRunner).
func (s *Service) prepareCommands(e *Environment, spec createSpec) {
	env, fixed := CommandEnv(s.opts.Env, spec.req.GetVault(), sandboxEnv(spec.sandbox))
	e.env = env
	e.commands = &commandRunner{
		policy:  spec.sandbox,
		byGroup: s.opts.NoCgroups,
		newSandbox: func() (*sandbox.Env, error) {
			sb, err := sandbox.NewEnv(spec.sandbox, s.opts.Self)
			if err != nil {
				// It fails once, for this call and every later one.
				e.log.Error("the environment's sandbox could not be started; its commands fail", "error", err)
			}
			return sb, err
		},
		newManager: func(sb *sandbox.Env, launcher command.Launcher) (*command.Manager, error) {
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
			HTTP: egress.NewClient(egress.Options{NoNetwork: spec.sandbox.Network == sandbox.NetworkNone, Allow: s.opts.FetchAllow}),
		})); err != nil {
			return err
		}
	}
	if err := e.assembleCustom(tools.GetCustom(), custom.Options{Shell: s.opts.Shell, Dir: spec.workspace, Env: e.env, Launcher: e.commands}); err != nil {
		return err
	}
	conns, mcpTools, end := mcp.ConnectAll(ctx, tools.GetMcpServers(), mcp.Options{
		Workspace:     spec.workspace,
		Limits:        tool.Limits{Timeout: tool.DefaultTimeout, MaxOutput: tool.DefaultMaxOutput},
		Logger:        e.log,
		ClientName:    "penguin",
		ClientVersion: s.opts.Version,
	})
	e.mcpConns, e.mcpEnd = conns, end
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

// ListTools implements penguinv1.EnvironmentServiceServer.
func (s *Service) ListTools(ctx context.Context, req *penguinv1.ListToolsRequest) (*penguinv1.ListToolsResponse, error) {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return nil, notFound(req.GetEnvironmentId())
	}
	return &penguinv1.ListToolsResponse{Tools: e.toolInfos()}, nil
}

// GetToolPermission implements penguinv1.EnvironmentServiceServer.
func (s *Service) GetToolPermission(ctx context.Context, req *penguinv1.GetToolPermissionRequest) (*penguinv1.GetToolPermissionResponse, error) {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return nil, notFound(req.GetEnvironmentId())
	}
	resp := &penguinv1.GetToolPermissionResponse{}
	if spec, ok := e.tools[req.GetName()]; ok {
		resp.Permission = spec.Tool.Permission()
	}
	return resp, nil
}

// ExecuteTool implements penguinv1.EnvironmentServiceServer. Everything
// that goes wrong with the call itself (an unknown environment or tool,
// bad arguments, a failing tool) comes back as a failed tool_call_output.
func (s *Service) ExecuteTool(req *penguinv1.ExecuteToolRequest, stream grpc.ServerStreamingServer[penguinv1.ExecuteToolResponse]) error {
	call := req.GetToolCall()
	if call == nil || call.GetToolCallId() == "" {
		return status.Error(codes.InvalidArgument, "tool_call with a tool_call_id is required: the output must name the call it answers")
	}
	ctx := stream.Context()
	// The call's complete output says how it ended, for the metrics.
	ended := penguinv1.StopReason_STOP_REASON_UNSPECIFIED
	var e *Environment
	cutByShutdown := false
	send := func(m *penguinv1.OmniMessage) error {
		if s.closing.Load() && e != nil && e.ctx.Err() != nil && ctx.Err() == nil {
			// The replica is shutting down and takes the call's processes
			// with it: what the call would say about that is not sent, and
			// the caller hears Unavailable instead (below), as if the
			// replica had gone, so that its next call runs elsewhere.
			cutByShutdown = true
			return nil
		}
		if o := m.GetToolCallOutput(); o != nil && len(m.GetOrigin()) == 0 && o.GetToolCallId() == call.GetToolCallId() {
			ended = o.GetStopReason()
		}
		return stream.Send(&penguinv1.ExecuteToolResponse{Message: m})
	}
	e, ok := s.get(req.GetEnvironmentId())
	if !ok || !e.enter() {
		if s.closing.Load() {
			return errShuttingDown
		}
		framing.Reply(ctx, call.GetToolCallId(),
			fmt.Sprintf("Unknown environment %q: it was disposed, or never created on this replica. The tool did not run.", req.GetEnvironmentId()),
			penguinv1.StopReason_STOP_REASON_FAILED, framing.Options{}, send)
		return nil
	}
	defer e.leave()
	// Disposing the environment aborts its running calls.
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(e.ctx, cancel)
	defer stop()
	started := time.Now()
	e.execute(callCtx, call, send)
	_, known := e.tools[call.GetName()]
	if cutByShutdown {
		ended = penguinv1.StopReason_STOP_REASON_FAILED
	}
	s.metrics.observe(call.GetName(), known, ended, time.Since(started))
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	if cutByShutdown {
		return errShuttingDown
	}
	return nil
}

// errShuttingDown answers the calls that a replica being stopped cannot
// serve: new environments, and tool calls whose environment it disposed
// (or is disposing). Unavailable tells the engine to go to another replica.
var errShuttingDown = status.Error(codes.Unavailable, "the environment replica is shutting down; its environments and their processes are gone")

// ListProcesses implements penguinv1.EnvironmentServiceServer.
func (s *Service) ListProcesses(ctx context.Context, req *penguinv1.ListProcessesRequest) (*penguinv1.ListProcessesResponse, error) {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return nil, notFound(req.GetEnvironmentId())
	}
	resp := &penguinv1.ListProcessesResponse{}
	for _, p := range e.commands.list() {
		state := penguinv1.ProcessState_PROCESS_STATE_RUNNING
		switch p.State {
		case command.Exited:
			state = penguinv1.ProcessState_PROCESS_STATE_EXITED
		case command.Killed:
			state = penguinv1.ProcessState_PROCESS_STATE_KILLED
		}
		resp.Processes = append(resp.Processes, &penguinv1.ProcessInfo{
			ProcessId: p.ID, Command: e.vault.String(p.Command), State: state, ExitCode: int32(p.ExitCode),
			Pid: int32(p.Pid), StartedAtMs: p.Started.UnixMilli(), Background: p.Background,
		})
	}
	return resp, nil
}

// WatchEnvironment implements penguinv1.EnvironmentServiceServer. The
// stream ends when the environment is disposed or the call is cancelled.
func (s *Service) WatchEnvironment(req *penguinv1.WatchEnvironmentRequest, stream grpc.ServerStreamingServer[penguinv1.WatchEnvironmentResponse]) error {
	e, ok := s.get(req.GetEnvironmentId())
	if !ok {
		return notFound(req.GetEnvironmentId())
	}
	ch, unsubscribe := e.notices.subscribe()
	defer unsubscribe()
	// Headers go out now, so a caller knows the watch is in place before
	// the first notice.
	if err := stream.SendHeader(nil); err != nil {
		return err
	}
	for {
		select {
		case n, open := <-ch:
			if !open {
				if e.notices.isClosed() {
					return nil // disposed
				}
				return status.Error(codes.ResourceExhausted, "this watcher fell too far behind and was dropped; watch again")
			}
			if err := stream.Send(n); err != nil {
				return err
			}
		case <-stream.Context().Done():
			return status.FromContextError(stream.Context().Err()).Err()
		}
	}
}

// DisposeEnvironment implements penguinv1.EnvironmentServiceServer. It is
// idempotent: an unknown id answers disposed=false.
func (s *Service) DisposeEnvironment(ctx context.Context, req *penguinv1.DisposeEnvironmentRequest) (*penguinv1.DisposeEnvironmentResponse, error) {
	s.mu.Lock()
	e, ok := s.envs[req.GetEnvironmentId()]
	delete(s.envs, req.GetEnvironmentId())
	s.mu.Unlock()
	if !ok {
		return &penguinv1.DisposeEnvironmentResponse{Disposed: false}, nil
	}
	e.dispose()
	s.log.Info("environment disposed", "environment", e.id)
	return &penguinv1.DisposeEnvironmentResponse{Disposed: true}, nil
}

// Close disposes every environment, ending every process the service
// started. Call it when the server shuts down. From then on the service
// answers as a replica that went away would, with codes.Unavailable ("the
// environment replica is shutting down"): a tool call it cuts short (after
// the output it had streamed), a tool call for an environment it disposed,
// and a new environment.
func (s *Service) Close() {
	s.closing.Store(true)
	s.mu.Lock()
	envs := make([]*Environment, 0, len(s.envs))
	for id, e := range s.envs {
		envs = append(envs, e)
		delete(s.envs, id)
	}
	s.mu.Unlock()
	s.scratch.Close()
	defer s.proxy.close()
	sort.Slice(envs, func(i, j int) bool { return envs[i].id < envs[j].id })
	var wg sync.WaitGroup
	for _, e := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.dispose()
		}()
	}
	wg.Wait()
}
