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
//
// The parts with a life of their own are packages of their own, each with
// its tests: the numbering and group commit of events (journal), run
// leases (lease), the watch of an environment's background commands
// (envwatch), approval questions (approval.Board), and the tools the
// engine runs itself (enginetool/...). This package wires them to sessions:
// lifecycle (lifecycle.go), tasks (run.go, prepare.go, control.go), the
// event stream of watchers (follow.go), the environment and tool set of a
// task (environment.go, toolset.go) and the parent side of subagents
// (subagents.go).
package session

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cmdpolicy"
	"github.com/penguin-agent/penguin/internal/dirstamp"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/approval"
	"github.com/penguin-agent/penguin/services/engine/enginetool/subagent"
	"github.com/penguin-agent/penguin/services/engine/lease"
	"github.com/penguin-agent/penguin/services/engine/sessionwatch"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// storeTimeout bounds a call the engine makes on no caller's behalf: a
// write of the log, the update of a row after a task, the release of a
// lease. Such a call is never cut short by a caller going away (an abort
// must still be recorded), only by this.
const storeTimeout = 30 * time.Second

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
	// Agents keeps the working copies of the agents the store holds
	// (package agentmirror): a session whose agent it knows reads the
	// copy brought up to date at the start of each task, and the
	// agent-file tools' writes reach the store at once. Nil reads every
	// agent state directory as it stands.
	Agents AgentCopies
	// CommandPolicy is the deny-rule policy for shell commands, applied by
	// the engine before approval and by every environment it creates. Nil
	// means the factory rules.
	CommandPolicy *penguinv1.CommandPolicy
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// EngineID names this engine replica in run leases; empty means the
	// host name and Address, or a random name without an Address.
	// Address is where it can be reached.
	EngineID string
	Address  string
	// LeaseTTL is how long a run lease lasts between renewals; zero means
	// lease.DefaultTTL.
	LeaseTTL time.Duration
	// Transient is a short-lived engine (a client command's own server):
	// it resumes no cut-off runs and hands none over (see engine.Config).
	Transient bool
	// BufferEvents and BufferBytes bound each running session's live
	// buffer; zero means the live package's defaults.
	BufferEvents int
	BufferBytes  int
	// MaxSubagents caps the subagents one session runs at once; zero means
	// subagent.DefaultMax.
	MaxSubagents int
	// TracerProvider opens the span of each turn, the root of the turn's
	// trace; nil traces nothing.
	TracerProvider trace.TracerProvider
	// Registerer receives the engine's metrics (sessions, runs, turns,
	// retries, approvals); nil keeps them unregistered.
	Registerer prometheus.Registerer
	// EnvironmentIdleTimeout is how long a session's environment outlives
	// the session's last use of it; zero means
	// DefaultEnvironmentIdleTimeout.
	EnvironmentIdleTimeout time.Duration
	// LogLinger is how long an event of a session's log that is no
	// durability point (a model request's events, an approval decision)
	// may wait to be committed with the next one, a tool's output, a
	// state change or a flush (package journal). Below the journal's
	// floor of 2 ms, which is what zero means, it is that floor: a model
	// request's events then go in the commit of what follows them. A
	// store whose transactions cost a network round trip may gain from a
	// few ms more.
	LogLinger time.Duration
}

// Manager owns the sessions of one engine replica.
type Manager struct {
	opts      Options
	store     store.Store
	policy    approval.Policy
	log       *slog.Logger
	tracer    trace.Tracer
	metrics   *metrics
	leases    *lease.Keeper
	subagents *subagent.Registry
	// watch tells the watchers of the session list about changes.
	watch *sessionwatch.Hub
	// specs remembers what the environment service answered for each
	// environment spec; idleEnvs disposes of environments no task uses.
	specs    envSpecs
	idleEnvs *idleEnvs

	mu         sync.Mutex
	runtimes   map[string]*Runtime
	envClients map[string]penguinv1.EnvironmentServiceClient
	closing    bool
	tasks      sync.WaitGroup
	// stopping closes at Shutdown, ending every watcher's stream.
	stopping chan struct{}
}

// New returns a Manager.
func New(opts Options) (*Manager, error) {
	if opts.Store == nil || opts.LLM == nil || opts.Environment == nil {
		return nil, errors.New("session: a store, an llm client and an environment client are required")
	}
	if opts.CommandPolicy == nil {
		opts.CommandPolicy = &penguinv1.CommandPolicy{UseDefaults: true}
	}
	pol, err := cmdpolicy.Compile(opts.CommandPolicy)
	if err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	opts.Logger = logger.OrDiscard(opts.Logger)
	leases := lease.New(opts.Store, lease.Options{Owner: opts.EngineID, Address: opts.Address, TTL: opts.LeaseTTL, Logger: opts.Logger})
	if opts.TracerProvider == nil {
		opts.TracerProvider = noop.NewTracerProvider()
	}
	m := &Manager{
		opts:       opts,
		store:      opts.Store,
		policy:     pol,
		log:        opts.Logger,
		tracer:     opts.TracerProvider.Tracer("github.com/penguin-agent/penguin/services/engine"),
		leases:     leases,
		subagents:  subagent.NewRegistry(opts.MaxSubagents),
		runtimes:   map[string]*Runtime{},
		envClients: map[string]penguinv1.EnvironmentServiceClient{},
		stopping:   make(chan struct{}),
	}
	m.idleEnvs = newIdleEnvs(m, opts.EnvironmentIdleTimeout)
	m.watch = sessionwatch.New(m, opts.Logger)
	m.store = m.watch.Store(opts.Store)
	if m.metrics, err = newMetrics(m, opts.Registerer); err != nil {
		return nil, fmt.Errorf("session: %w", err)
	}
	return m, nil
}

// newSessionID returns an id in the shape PenguinHarness gives its
// sessions, session-YYYY-MM-DD-HH-mm-ss-<8hex>, so that ids and trace file
// names read the same in both.
func newSessionID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return "session-" + time.Now().UTC().Format("2006-01-02-15-04-05") + "-" + hex.EncodeToString(b)
}

// acquire returns the session's runtime, loading it when needed, and holds
// a reference on it until release.
func (m *Manager) acquire(ctx context.Context, id string) (*Runtime, error) {
	return m.acquireFrom(ctx, id, nil)
}

// acquireFrom is acquire that loads the runtime from row, the session's
// row as the caller just read it, unless row is nil.
func (m *Manager) acquireFrom(ctx context.Context, id string, row *store.Session) (*Runtime, error) {
	if rt := m.loaded(id); rt != nil {
		return rt, nil
	}
	if row == nil || row.ID != id {
		var err error
		if row, err = m.store.GetSession(ctx, id); err != nil {
			return nil, err
		}
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
// back, in one transaction of the store, so that no other update of the
// row, from this replica or another, comes between the read and the write.
func (m *Manager) updateRow(ctx context.Context, id string, f func(*store.Session, *config)) error {
	return m.store.ModifySession(ctx, id, rowChange(f))
}

// rowChange turns f, a change of a session's row and config, into a
// change of the row as the store makes it (ModifySession, or a
// journal's FlushWith).
func rowChange(f func(*store.Session, *config)) func(*store.Session) error {
	return func(row *store.Session) error {
		cfg, err := parseConfig(row.Config)
		if err != nil {
			return err
		}
		f(row, &cfg)
		row.Config = cfg.bytes()
		return nil
	}
}

// AgentCopies keeps working copies of the agents a store holds; see
// Options.Agents.
type AgentCopies interface {
	// Resolve names the agent a session's agent reference stands for;
	// ok is false for a directory that is no working copy.
	Resolve(ref string) (project, agent string, ok bool)
	// Sync brings an agent's working copy up to date and returns its
	// directory; an unknown agent is an error wrapping store.ErrNotFound.
	Sync(ctx context.Context, project, agent string) (string, error)
	// SyncHeld is Sync, also returning the copy's stamp when it found
	// the copy unchanged (zero when not), for agentstate.LoadHeld.
	SyncHeld(ctx context.Context, project, agent string) (string, dirstamp.Stamp, error)
	// SyncAt is SyncHeld with the agent's version as the store read it
	// a moment ago (zero: no such agent), instead of asking for it.
	SyncAt(ctx context.Context, project, agent string, version int64) (string, dirstamp.Stamp, error)
}

// agentOf names the agent of the store whose working copy an agent
// state directory is (the default one for ""); ok is false when the
// engine keeps no copies or dir is none of them.
func (m *Manager) agentOf(dir string) (ref store.AgentRef, ok bool) {
	if m.opts.Agents == nil {
		return store.AgentRef{}, false
	}
	if dir == "" {
		dir = m.opts.DefaultAgentState
	}
	ref.Project, ref.Name, ok = m.opts.Agents.Resolve(dir)
	return ref, ok
}

// loadAgent loads an agent state directory: the working copy of an agent
// of the store, brought up to date, or a directory as it stands. The
// default one is created when missing; a named one must exist. When read,
// what a task read with its row (store.LeaseRead), holds the version of
// the copy's agent, the copy is brought up to date from that version
// rather than from a read of its own.
func (m *Manager) loadAgent(ctx context.Context, dir string, read *store.LeaseRead) (*agentstate.State, error) {
	if a, ok := m.agentOf(dir); ok {
		var (
			copyDir string
			held    dirstamp.Stamp
			err     error
		)
		if read != nil && read.AgentRead && read.Agent == a {
			copyDir, held, err = m.opts.Agents.SyncAt(ctx, a.Project, a.Name, read.AgentVersion)
		} else {
			copyDir, held, err = m.opts.Agents.SyncHeld(ctx, a.Project, a.Name)
		}
		switch {
		case errors.Is(err, store.ErrNotFound) && cmp.Or(dir, m.opts.DefaultAgentState) != a.Name:
			// A directory beside the working copies that the store
			// does not hold: read as it stands, below.
		case errors.Is(err, store.ErrNotFound):
			return nil, fmt.Errorf("%w: agent %q does not exist", ErrInvalid, a.Name)
		case err != nil:
			return nil, fmt.Errorf("%w: agent %q: %v", ErrUnavailable, a.Name, err)
		default:
			st, err := agentstate.LoadHeld(copyDir, held)
			if err != nil {
				return nil, fmt.Errorf("%w: %v", ErrPrecondition, err)
			}
			return st, nil
		}
	}
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
	owner, addr, held, err := m.leases.Holder(ctx, id)
	if err != nil || !held {
		return "", false, err
	}
	return addr, owner != m.leases.Owner() && addr != "", nil
}

// elsewhere reports, for a session with no runtime here, the engine
// replica that runs it now (a live lease held by another owner), as an
// error that tells the caller where to go.
func (m *Manager) elsewhere(ctx context.Context, id string) error {
	owner, addr, held, err := m.leases.Holder(ctx, id)
	if err != nil || !held || owner == m.leases.Owner() {
		return nil
	}
	return fmt.Errorf("%w: session %s is running on engine %s; call it at %s", ErrPrecondition, id, owner, addr)
}

// toProto describes a session row.
func (m *Manager) toProto(row *store.Session, state penguinv1.SessionState) *penguinv1.Session {
	marks := listMarks(row.Config)
	return &penguinv1.Session{
		Pinned:          marks.Pinned,
		Archived:        marks.Archived,
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
		ProjectId:       row.ProjectID,
		Agent:           m.agentName(row.AgentState),
	}
}

// agentName is the name of the agent a session's agent directory holds a
// working copy of; empty for a directory outside the agents.
func (m *Manager) agentName(dir string) string {
	if m.opts.Agents == nil {
		return ""
	}
	if _, agent, ok := m.opts.Agents.Resolve(dir); ok {
		return agent
	}
	return ""
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

// List returns one page of sessions, newest first: of the projects
// given, or of every project when none are (see store.ListSessions).
func (m *Manager) List(ctx context.Context, pageSize int, token string, projects ...string) ([]*penguinv1.Session, string, error) {
	rows, next, err := m.store.ListSessions(ctx, pageSize, token, projects...)
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
