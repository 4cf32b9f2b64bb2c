package environment

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/environment/checkpoint"
	"github.com/penguin-agent/penguin/services/environment/egress"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

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
	// fetchClients are the HTTP clients of read_image's URL fetches,
	// with the network and without, made on first use and shared by
	// every environment: they differ in nothing else, and a client per
	// environment (its transport, dialer and closures) was kept for as
	// long as the environment, which outlives its session's task by
	// the environment idle timeout.
	fetchClients [2]func() *http.Client

	metrics *metrics

	// checkpointMu serializes checkpoints and restores, so that a
	// restore's checkpoints around it see nothing else's writes to the
	// stores.
	checkpointMu sync.Mutex
	// writes knows when a workspace's last checkpoint still holds.
	writes writeTracker
	// stores keeps the checkpoint stores of the live environments'
	// workspaces open between checkpoints.
	stores heldStores

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
	if opts.CheckpointRetention, err = opts.CheckpointRetention.WithDefaults(); err != nil {
		return nil, err
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
	// What this system cannot do that Linux does is said once, on the
	// service's first lines (and in every DescribeWorkspace answer).
	if opts.HostLimitations == nil {
		opts.HostLimitations = sandbox.Unavailable()
	}
	for _, missing := range opts.HostLimitations {
		log.Warn("not available on this system: " + missing)
	}
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
	if opts.Checkpoints == (checkpoint.Limits{}) {
		opts.Checkpoints = checkpoint.DefaultLimits
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	s := &Service{opts: opts, root: root, scratch: scratch, log: log, envs: map[string]*Environment{}, proxy: &egressProxy{allow: opts.FetchAllow}}
	for i := range s.fetchClients {
		noNetwork := i == 1
		s.fetchClients[i] = sync.OnceValue(func() *http.Client {
			return egress.NewClient(egress.Options{NoNetwork: noNetwork, Allow: opts.FetchAllow})
		})
	}
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
// enforce stops the service at start, naming what is missing; so does a
// service that requires a sandbox (--sandbox-required) where the host
// cannot confine, or with the default sandbox mode none.
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
	requested := s.opts.DefaultSandbox
	if requested == "" && s.opts.SandboxRequired {
		// A required sandbox is a confined default given explicitly.
		requested = sandbox.WorkspaceWrite.String()
	}
	if requested == "" {
		s.defaultMode = sandbox.WorkspaceWrite
		if confinable != nil {
			s.defaultMode = sandbox.None
			s.log.Warn("environments that do not ask for a sandbox run unconfined: this host cannot enforce workspace-write", "reason", confinable)
		}
		return nil
	}
	if s.defaultMode, err = sandbox.ParseMode(requested); err != nil {
		return err
	}
	if s.defaultMode == sandbox.None && s.opts.SandboxRequired {
		return fmt.Errorf("default sandbox mode none: %w", errUnconfinedRefused)
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
