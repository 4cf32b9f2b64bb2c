// Package session is the engine's live session runtime: it creates and
// loads sessions, numbers every event of a session, records events in the
// store before anyone sees them, fans them out to any number of watchers
// (Run and Attach streams) through a bounded live buffer, and drives tasks
// through the agent loop with approvals, steering, aborts, reconnect waits
// and compaction.
//
// An idle session costs nothing but its store row: a runtime is loaded
// when a task starts or a watcher attaches, and dropped when the last of
// them is gone. Its model context is rebuilt from the log at every task.
package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/approval"
	"github.com/penguin-agent/penguin/services/engine/sessionwatch"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/environment/policy"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Options configure a Manager.
type Options struct {
	// Store keeps sessions and their logs.
	Store store.Store
	// LLM is the model gateway.
	LLM penguinv1.LLMServiceClient
	// Environment is the environment service sessions get their
	// environments from.
	Environment penguinv1.EnvironmentServiceClient
	// DialEnvironment returns a client for an environment replica that
	// asked to be reached at its own address; nil uses Environment for
	// every address.
	DialEnvironment func(addr string) (penguinv1.EnvironmentServiceClient, error)
	// DefaultAgentState is the agent state directory of sessions that do
	// not name one; it is created with defaults when missing.
	DefaultAgentState string
	// CommandPolicy is the deny-rule policy for shell commands, applied by
	// the engine before approval and by every environment it creates. Nil
	// means the factory rules.
	CommandPolicy *penguinv1.CommandPolicy
	// Logger receives operational messages; nil means slog.Default().
	Logger *slog.Logger
	// EngineID names this engine replica in run leases; empty means the
	// host name and Address, or a random name without an Address.
	// Address is where it can be reached.
	EngineID string
	Address  string
	// LeaseTTL is how long a run lease lasts between renewals; zero means
	// 30 s.
	LeaseTTL time.Duration
	// BufferEvents and BufferBytes bound each running session's live
	// buffer; zero means the live package's defaults.
	BufferEvents int
	BufferBytes  int
	// MaxSubagents caps the subagent sessions one session holds; zero
	// means 8.
	MaxSubagents int
	// TracerProvider opens the span of each turn, the root of the turn's
	// trace; nil traces nothing.
	TracerProvider trace.TracerProvider
	// Registerer receives the engine's metrics (sessions, runs, turns,
	// retries, approvals); nil keeps them unregistered.
	Registerer prometheus.Registerer
}

// Manager owns the sessions of one engine replica.
type Manager struct {
	opts    Options
	store   store.Store
	policy  approval.Policy
	log     *slog.Logger
	tracer  trace.Tracer
	metrics *metrics
	// watch tells the watchers of the session list about changes.
	watch *sessionwatch.Hub

	// rowLocks serialize read-modify-write updates of session rows, which
	// the store treats as last-writer-wins.
	rowLocks [64]sync.Mutex

	mu         sync.Mutex
	runtimes   map[string]*Runtime
	envClients map[string]penguinv1.EnvironmentServiceClient
	closing    bool
	tasks      sync.WaitGroup
	// stopping closes at Shutdown, ending every watcher's stream.
	stopping chan struct{}
	// subagents holds each parent session's running subagents.
	subagents map[string]*children
}

// New returns a Manager.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil || opts.LLM == nil || opts.Environment == nil {
		return nil, errors.New("session: a store, an llm client and an environment client are required")
	}
	if opts.CommandPolicy == nil {
		opts.CommandPolicy = &penguinv1.CommandPolicy{UseDefaults: true}
	}
	pol, err := policy.Compile(opts.CommandPolicy)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.EngineID == "" {
		// An engine restarted on the same host and address is the same
		// owner: it takes its old leases back at once instead of waiting
		// for them to expire after a crash. Two live engines cannot share
		// an address, so the name is unique while it matters.
		if host, err := os.Hostname(); err == nil && opts.Address != "" {
			opts.EngineID = host + "/" + opts.Address
		} else {
			opts.EngineID = "engine-" + randomHex(6)
		}
	}
	if opts.LeaseTTL <= 0 {
		opts.LeaseTTL = 30 * time.Second
	}
	if opts.MaxSubagents <= 0 {
		opts.MaxSubagents = 8
	}
	if opts.TracerProvider == nil {
		opts.TracerProvider = noop.NewTracerProvider()
	}
	m := &Manager{
		opts:       opts,
		store:      opts.Store,
		policy:     pol,
		log:        opts.Logger,
		tracer:     opts.TracerProvider.Tracer("github.com/penguin-agent/penguin/services/engine"),
		runtimes:   map[string]*Runtime{},
		envClients: map[string]penguinv1.EnvironmentServiceClient{},
		stopping:   make(chan struct{}),
	}
	m.watch = sessionwatch.New(m, opts.Logger)
	m.store = m.watch.Store(opts.Store)
	if m.metrics, err = newMetrics(m, opts.Registerer); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return m, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newSessionID returns an id in the reference's shape,
// session-YYYY-MM-DD-HH-mm-ss-<8hex>.
func newSessionID() string {
	return "session-" + time.Now().UTC().Format("2006-01-02-15-04-05") + "-" + randomHex(4)
}

// acquire returns the session's runtime, loading it when needed, and holds
// a reference on it until release.
func (m *Manager) acquire(ctx context.Context, id string) (*Runtime, error) {
	if rt := m.loaded(id); rt != nil {
		return rt, nil
	}
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	cfg, err := parseConfig(row.Config)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if rt := m.runtimes[id]; rt != nil {
		rt.refs++
		return rt, nil
	}
	rt := newRuntime(m, row, cfg)
	rt.refs = 1
	m.runtimes[id] = rt
	return rt, nil
}

// loaded returns the session's runtime with a reference, or nil when it
// is not loaded.
func (m *Manager) loaded(id string) *Runtime {
	m.mu.Lock()
	defer m.mu.Unlock()
	rt := m.runtimes[id]
	if rt != nil {
		rt.refs++
	}
	return rt
}

// release drops a reference; the last one unloads the runtime.
func (m *Manager) release(rt *Runtime) {
	m.mu.Lock()
	rt.refs--
	drop := rt.refs == 0
	if drop && m.runtimes[rt.id] == rt {
		delete(m.runtimes, rt.id)
	}
	m.mu.Unlock()
	if drop {
		rt.unload()
	}
}

// Loaded returns the number of loaded runtimes, for tests and metrics.
func (m *Manager) Loaded() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.runtimes)
}

// updateRow applies f to the session's row and config and writes them
// back, serialized with the engine's other updates of that row.
func (m *Manager) updateRow(ctx context.Context, id string, f func(*store.Session, *config)) error {
	h := fnv.New32a()
	h.Write([]byte(id))
	l := &m.rowLocks[h.Sum32()%uint32(len(m.rowLocks))]
	l.Lock()
	defer l.Unlock()
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return err
	}
	cfg, err := parseConfig(row.Config)
	if err != nil {
		return err
	}
	f(row, &cfg)
	row.Config = cfg.bytes()
	return m.store.UpdateSession(ctx, row)
}

// envClient returns the client for an environment reached at addr.
func (m *Manager) envClient(addr string) (penguinv1.EnvironmentServiceClient, error) {
	if addr == "" || m.opts.DialEnvironment == nil {
		return m.opts.Environment, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if c := m.envClients[addr]; c != nil {
		return c, nil
	}
	c, err := m.opts.DialEnvironment(addr)
	if err != nil {
		return nil, fmt.Errorf("%w: environment replica %s: %v", ErrUnavailable, addr, err)
	}
	m.envClients[addr] = c
	return c, nil
}

// loadAgent loads an agent state directory. The default one is created
// when missing; a named one must exist.
func (m *Manager) loadAgent(dir string) (*agentstate.State, error) {
	if dir == "" || dir == m.opts.DefaultAgentState {
		if m.opts.DefaultAgentState == "" {
			return nil, fmt.Errorf("%w: no agent state given and the engine has no default", ErrInvalid)
		}
		load := agentstate.Load
		if _, err := os.Stat(m.opts.DefaultAgentState); err != nil {
			load = agentstate.Init
		}
		st, err := load(m.opts.DefaultAgentState)
		if err != nil {
			return nil, fmt.Errorf("%w: default agent state: %v", ErrPrecondition, err)
		}
		return st, nil
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("%w: agent state directory %q does not exist", ErrInvalid, dir)
	}
	st, err := agentstate.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrPrecondition, err)
	}
	return st, nil
}

// Owner returns the advertised address of the engine replica that holds
// a live run lease on the session, and whether that replica is another
// one; a session without a live lease is this replica's to serve. It
// implements engine.Owners.
func (m *Manager) Owner(ctx context.Context, id string) (string, bool, error) {
	owner, addr, _, err := m.store.LeaseHolder(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "", false, nil
	case err != nil:
		return "", false, err
	}
	return addr, owner != m.opts.EngineID && addr != "", nil
}

// elsewhere reports, for a session with no runtime here, the engine
// replica that runs it now (a live lease held by another owner), as an
// error that tells the caller where to go.
func (m *Manager) elsewhere(ctx context.Context, id string) error {
	owner, addr, _, err := m.store.LeaseHolder(ctx, id)
	if err != nil || owner == m.opts.EngineID {
		return nil
	}
	return fmt.Errorf("%w: session %s is running on engine %s; call it at %s", ErrPrecondition, id, owner, addr)
}

// ErrPrecondition: the session cannot do this in its current state (its
// agent state no longer loads, say).
var ErrPrecondition = errors.New("failed precondition")

// downstream turns an error of the environment or llm service into the
// session layer's vocabulary.
func downstream(what string, err error) error {
	st := status.Convert(err)
	switch st.Code() {
	case codes.InvalidArgument, codes.OutOfRange:
		return fmt.Errorf("%w: %s: %s", ErrInvalid, what, st.Message())
	case codes.FailedPrecondition, codes.PermissionDenied, codes.Unimplemented:
		return fmt.Errorf("%w: %s: %s", ErrPrecondition, what, st.Message())
	case codes.NotFound:
		return fmt.Errorf("%w: %s: %s", ErrNotFound, what, st.Message())
	case codes.Canceled, codes.DeadlineExceeded:
		return fmt.Errorf("%s: %w", what, err)
	default:
		return fmt.Errorf("%w: %s: %s", ErrUnavailable, what, st.Message())
	}
}

// toProto describes a session row.
func (m *Manager) toProto(row *store.Session, state penguinv1.SessionState) *penguinv1.Session {
	return &penguinv1.Session{
		SessionId:       row.ID,
		Model:           &penguinv1.ModelRef{Provider: row.Provider, ModelId: row.ModelID},
		Workspace:       row.Workspace,
		ApprovalMode:    row.ApprovalMode,
		ThinkingLevel:   row.ThinkingLevel,
		State:           state,
		CreatedAt:       timestamppb.New(row.CreatedAt),
		UpdatedAt:       timestamppb.New(row.UpdatedAt),
		LastSequence:    row.LastSequence,
		Title:           row.Title,
		ParentSessionId: row.ParentID,
		Source:          row.Source,
		Usage:           row.Usage,
	}
}

// stateOf returns what a session is doing now.
func (m *Manager) stateOf(id string) penguinv1.SessionState {
	m.mu.Lock()
	rt := m.runtimes[id]
	m.mu.Unlock()
	if rt == nil {
		return penguinv1.SessionState_SESSION_STATE_IDLE
	}
	return rt.State()
}

// Get describes a session.
func (m *Manager) Get(ctx context.Context, id string) (*penguinv1.Session, error) {
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	return m.toProto(row, m.stateOf(id)), nil
}

// List returns one page of sessions, newest first.
func (m *Manager) List(ctx context.Context, pageSize int, token string) ([]*penguinv1.Session, string, error) {
	rows, next, err := m.store.ListSessions(ctx, pageSize, token)
	if err != nil {
		return nil, "", err
	}
	out := make([]*penguinv1.Session, len(rows))
	for i, r := range rows {
		out[i] = m.toProto(r, m.stateOf(r.ID))
	}
	return out, next, nil
}

// title cuts a prompt to a one-line title.
func title(prompt string) string {
	t := strings.Join(strings.Fields(prompt), " ")
	if r := []rune(t); len(r) > 80 {
		t = string(r[:79]) + "…"
	}
	return t
}
