package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/accounts"
	"github.com/penguin-agent/penguin/services/engine/agentapi"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/lease"
	"github.com/penguin-agent/penguin/services/engine/oidclogin"
	"github.com/penguin-agent/penguin/services/engine/scheduler"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// OIDCConfig configures sign-in through an identity provider. It is the
// oidclogin package's, named here so that the command that builds an
// engine reads it from the service's root package, not from inside it.
type OIDCConfig = oidclogin.Config

// DefaultOIDCGroupsClaim is the claim that lists a user's groups when
// none is configured.
const DefaultOIDCGroupsClaim = oidclogin.DefaultGroupsClaim

// DefaultLeaseTTL is how long a run's lease outlives its replica when
// [Config] sets none: after a crash, the session can run elsewhere once
// it has passed.
const DefaultLeaseTTL = lease.DefaultTTL

// DefaultScheduleMissedAfter is how late a schedule's due time may be
// taken up and still run as on time, when [Config] sets none.
const DefaultScheduleMissedAfter = scheduler.DefaultMissedAfter

// MinLeaseTTL is the shortest lease [Setup] accepts. A lease is renewed at
// a third of its length; below a second, a slow store round trip would
// let a healthy replica lose its runs.
const MinLeaseTTL = time.Second

// DefaultEnvironmentIdleTimeout is how long a session's environment
// outlives the session's last use of it when [Config] sets none.
const DefaultEnvironmentIdleTimeout = session.DefaultEnvironmentIdleTimeout

// Config is what a process needs to stand the engine up the standard way:
// `penguin serve engine`, the all-in-one `penguin serve` and the server a
// client command embeds all use [Setup], so every deployment forwards
// calls between replicas, leases its runs for LeaseTTL and reaches
// environment replicas at the addresses they advertise.
type Config struct {
	// StoreURL names the session store: a SQLite path or sqlite: URL, or a
	// postgres:// URL. Required.
	StoreURL string
	// AgentState is the default agent's state directory, created with
	// defaults when missing. Required.
	AgentState string
	// LLM and Environment are the connections to the llm service and to
	// the environment service (where new environments are created); the
	// caller owns them. Required.
	LLM, Environment grpc.ClientConnInterface
	// Dial opens a connection, with this process's token and tracing, to
	// a replica the engine learns about at run time: an environment
	// replica at the address it advertised, or another engine replica
	// that owns a run. Connections are kept, one per address, until
	// [Engine.Close]. Required.
	Dial func(target string) (grpcclient.Conn, error)
	// Advertise is the address other engine replicas reach this one at,
	// recorded in run leases. Required.
	Advertise string
	// LeaseTTL is how long a run's lease outlives this replica; zero
	// means DefaultLeaseTTL. It must be at least MinLeaseTTL.
	LeaseTTL time.Duration
	// Transient marks the short-lived server of a client command (penguin
	// run, chat, sessions): it neither resumes the runs other engines left
	// cut off nor hands its own over at shutdown, since nothing would take
	// them over; its tasks are aborted, recording their state.
	Transient bool
	// EnvironmentIdleTimeout is how long a session's environment outlives
	// the session's last use of it: it is then disposed of (its processes
	// end; the workspace stays) and the next tool call gets a fresh one.
	// Zero means DefaultEnvironmentIdleTimeout; it must not be negative.
	EnvironmentIdleTimeout time.Duration
	// LogLinger is session.Options.LogLinger: how long an event of a
	// session's log that is no durability point may wait to be committed
	// with the next. Zero, the default, is the journal's floor of 2 ms; it
	// must not be negative.
	LogLinger time.Duration
	// Team is team mode (users sign in or present tokens); false is local
	// mode (a laptop: no sign-in, one implicit user). The process decides
	// it from where it listens and whether sign-in is configured.
	Team bool
	// ServiceToken is the operator's token, which the services present
	// to each other; empty when none is set. In team mode it is required.
	ServiceToken string
	// AdminPasswordFile keeps the first password of the account admin in
	// team mode until the admin changes it; SeedAdminPassword, when set,
	// is that password instead (for automation), and no file is written.
	AdminPasswordFile, SeedAdminPassword string
	// OIDC configures sign-in through an identity provider; its zero
	// value configures none. It needs team mode.
	OIDC OIDCConfig
	// AccessRecheck is how often the access of an open stream (Attach,
	// WatchSessions, Run) is checked again, so that a caller who lost it
	// through another replica is cut off; zero means
	// access.DefaultRecheck. Changes made through this replica are
	// checked at once.
	AccessRecheck time.Duration
	// ScheduleMissedAfter is how late a schedule's due time may be
	// claimed and still count as on time, not missed (see package
	// scheduler); zero means scheduler.DefaultMissedAfter.
	ScheduleMissedAfter time.Duration
	// Logger receives operational messages; nil discards them.
	Logger *slog.Logger
	// TracerProvider opens the span of each turn; nil traces nothing.
	TracerProvider trace.TracerProvider
	// Registerer receives the engine's metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
}

// Engine is the engine service stood up by [Setup]: register it on a gRPC
// server, call Shutdown when the server begins to stop and Close once it
// has stopped.
type Engine struct {
	server   *Server
	sessions *session.Manager
	store    store.Store
	agents   *agentmirror.Mirror
	agentAPI *agentapi.Server
	replicas *grpcclient.Pool
	guard    *access.Guard
	accounts *accounts.Server
	// schedules fires the agents' schedules; it runs only on a replica
	// that resumes tasks (not in a client command's own server).
	schedules *scheduler.Scheduler
	transient bool
}

// Setup checks cfg, initialises the default agent's state, opens the
// store and builds the session manager and its gRPC server, which passes
// calls for runs another replica owns on to that replica.
func Setup(ctx context.Context, cfg Config) (_ *Engine, err error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	log := logger.OrDiscard(cfg.Logger)
	ttl := cfg.LeaseTTL
	if ttl == 0 {
		ttl = DefaultLeaseTTL
	}
	if _, err := agentstate.Init(cfg.AgentState); err != nil {
		return nil, err
	}
	st, err := store.Open(ctx, cfg.StoreURL, store.WithLogger(log))
	if err != nil {
		return nil, fmt.Errorf("open the session store: %w", err)
	}
	if err := registerCommits(st, cfg.Registerer); err != nil {
		return nil, errors.Join(err, st.Close())
	}
	e := &Engine{store: st, replicas: grpcclient.NewPool(cfg.Dial)}
	e.guard = access.New(st, access.Options{Mode: cfg.mode(), ServiceToken: cfg.ServiceToken, Logger: log, Recheck: cfg.AccessRecheck})
	var login *oidclogin.Login
	if cfg.OIDC.Enabled() {
		if login, err = oidclogin.New(cfg.OIDC, st); err != nil {
			return nil, errors.Join(err, st.Close())
		}
		log.Info("sign-in through an identity provider", "issuer", cfg.OIDC.Issuer, "client_id", cfg.OIDC.ClientID, "redirect_url", cfg.OIDC.RedirectURL)
	}
	e.accounts = accounts.New(e.guard, penguinv1.NewLLMServiceClient(cfg.LLM), login)
	if cfg.Team {
		first, err := e.guard.SeedAdmin(ctx, cfg.AdminPasswordFile, cfg.SeedAdminPassword)
		if err != nil {
			return nil, err
		}
		if first != "" {
			// Printed on every start until the admin changes it, as the
			// way in for the first sign-in.
			log.Warn("sign in as "+store.AdminUser+" with the initial password "+first+" and change it; it is kept in "+cfg.AdminPasswordFile+" until then",
				"user", store.AdminUser)
		}
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, e.Close())
		}
	}()
	if e.agents, err = openAgents(ctx, st, cfg.AgentState, log); err != nil {
		return nil, err
	}
	e.sessions, err = session.New(session.Options{
		Store:             st,
		LLM:               penguinv1.NewLLMServiceClient(cfg.LLM),
		Environment:       penguinv1.NewEnvironmentServiceClient(cfg.Environment),
		DialEnvironment:   e.environmentReplica,
		DefaultAgentState: cfg.AgentState,
		Agents:            e.agents,
		Logger:            log,
		Address:           cfg.Advertise,
		LeaseTTL:          ttl,
		Transient:         cfg.Transient,
		TracerProvider:    cfg.TracerProvider,
		Registerer:        cfg.Registerer,

		EnvironmentIdleTimeout: cfg.EnvironmentIdleTimeout,
		LogLinger:              cfg.LogLinger,
	})
	if err != nil {
		return nil, err
	}
	e.agentAPI = agentapi.New(agentapi.Options{
		Store:         e.agents.Store(),
		LLM:           penguinv1.NewLLMServiceClient(cfg.LLM),
		Environment:   penguinv1.NewEnvironmentServiceClient(cfg.Environment),
		SkillLibrary:  filepath.Join(filepath.Dir(e.agents.Root()), "skills"),
		ModelSettings: st,
		Guard:         e.guard,
		Logger:        log,
	})
	e.schedules = scheduler.New(scheduler.Options{
		Store: st, Sessions: e.sessions, Agents: e.agents, MissedAfter: cfg.ScheduleMissedAfter, Logger: log,
	})
	e.transient = cfg.Transient
	e.server = New(e.sessions, log, WithGuard(e.guard), WithForwarding(Forwarding{
		Owners: e.sessions, Peers: replicaPeers{e.replicas}, Self: cfg.Advertise, Observe: e.sessions.ObserveForward,
		Patience: ttl + ttl/2,
	}))
	return e, nil
}

// openAgents keeps the store's agents in working copies beside the
// default agent's directory (its parent, the agents/ directory), after
// adopting into the store the agent directories found there that it does
// not hold yet: on the first start, the agents the engine kept on disk.
func openAgents(ctx context.Context, st store.Store, defaultDir string, log *slog.Logger) (*agentmirror.Mirror, error) {
	as, ok := st.(store.AgentStore)
	if !ok {
		return nil, fmt.Errorf("engine: the store %T keeps no agents", st)
	}
	abs, err := filepath.Abs(defaultDir)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	if err := agentmirror.ValidName(filepath.Base(abs)); err != nil {
		return nil, fmt.Errorf("engine: the default agent's directory %s: %w", abs, err)
	}
	m, err := agentmirror.New(as, filepath.Dir(abs), log)
	if err != nil {
		return nil, err
	}
	if err := m.Adopt(ctx); err != nil {
		return nil, fmt.Errorf("engine: adopt the agents of %s: %w", filepath.Dir(abs), err)
	}
	return m, nil
}

// mode is the access mode cfg.Team says.
func (cfg *Config) mode() access.Mode {
	if cfg.Team {
		return access.Team
	}
	return access.Local
}

// check reports the first required field cfg lacks, or a lease too short.
func (cfg *Config) check() error {
	switch {
	case cfg.StoreURL == "":
		return errors.New("engine: Config.StoreURL is required")
	case cfg.AgentState == "":
		return errors.New("engine: Config.AgentState is required")
	case cfg.LLM == nil || cfg.Environment == nil:
		return errors.New("engine: Config.LLM and Config.Environment are required")
	case cfg.Dial == nil:
		return errors.New("engine: Config.Dial is required")
	case cfg.Advertise == "":
		return errors.New("engine: Config.Advertise is required")
	case cfg.LeaseTTL != 0 && cfg.LeaseTTL < MinLeaseTTL:
		return fmt.Errorf("engine: lease TTL %s is too short; give at least %s", cfg.LeaseTTL, MinLeaseTTL)
	case cfg.OIDC.Enabled() && !cfg.Team:
		return errors.New("engine: sign-in through an identity provider needs team mode")
	case cfg.Team && cfg.ServiceToken == "":
		return errors.New("engine: team mode needs a service token, which the services present to each other")
	case cfg.LogLinger < 0:
		return fmt.Errorf("engine: log linger %s is negative; give a duration such as 2ms, or 0 to commit at once", cfg.LogLinger)
	case cfg.EnvironmentIdleTimeout < 0:
		return fmt.Errorf("engine: environment idle timeout %s is negative; give a duration such as 15m", cfg.EnvironmentIdleTimeout)
	}
	return nil
}

// environmentReplica reaches an environment replica at the address it
// advertised; the session manager caches the client per address.
func (e *Engine) environmentReplica(addr string) (penguinv1.EnvironmentServiceClient, error) {
	c, err := e.replicas.Get(addr)
	if err != nil {
		return nil, err
	}
	return penguinv1.NewEnvironmentServiceClient(c), nil
}

// replicaPeers reaches other engine replicas through the engine's pool.
type replicaPeers struct{ pool *grpcclient.Pool }

// Peer implements [Peers].
func (p replicaPeers) Peer(addr string) (penguinv1.EngineServiceClient, error) {
	c, err := p.pool.Get(addr)
	if err != nil {
		return nil, err
	}
	return penguinv1.NewEngineServiceClient(c), nil
}

// Register registers the engine's gRPC services on s: EngineService,
// AgentService, ScheduleService and those of users, projects and tokens.
func (e *Engine) Register(s grpc.ServiceRegistrar) {
	penguinv1.RegisterEngineServiceServer(s, e.server)
	penguinv1.RegisterAgentServiceServer(s, e.agentAPI)
	penguinv1.RegisterScheduleServiceServer(s, e.schedules.API())
	e.accounts.Register(s)
}

// Guard returns the engine's access guard, the authenticator of the gRPC
// server the engine is registered on.
func (e *Engine) Guard() *access.Guard { return e.guard }

// StartResuming resumes the tasks that a stopped engine left cut off, now
// and then as leases expire, and fires the schedules, until Shutdown.
// Call it once the server serves, so that clients following a resumed
// task reach it.
func (e *Engine) StartResuming() {
	e.sessions.StartResuming()
	if !e.transient {
		e.schedules.Start()
	}
}

// Settle does now what the store would do in the background after
// start-up's writes (store.Settler): a server calls it just before it
// gives back its start-up memory and reports ready.
func (e *Engine) Settle(ctx context.Context) error {
	if st, ok := e.store.(store.Settler); ok {
		return st.Settle(ctx)
	}
	return nil
}

// Shutdown hands durable tasks over (their leases expire at once, and the
// next replica resumes them), aborts the other running tasks, so that each
// records in the store how it ended, and ends every watcher's stream. Call
// it when the server begins to stop, before draining the calls in flight.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.schedules.Stop()
	return e.sessions.Shutdown(ctx)
}

// Close closes the connections to other replicas and the store; call it
// once the server has stopped.
func (e *Engine) Close() error {
	return errors.Join(e.replicas.Close(), e.store.Close())
}

// registerCommits exports, when the store counts them, the write
// transactions it committed and the statements it ran on its readers:
// with the tasks run, they say how many transactions and reads a task
// costs (docs/performance.md).
func registerCommits(st store.Store, reg prometheus.Registerer) error {
	if reg == nil {
		return nil
	}
	var counts []prometheus.Collector
	if c, ok := st.(store.CommitCounter); ok {
		counts = append(counts, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "penguin", Subsystem: "engine", Name: "store_commits_total",
			Help: "Write transactions the session store committed (SQLite only).",
		}, func() float64 { return float64(c.Commits()) }))
	}
	if c, ok := st.(store.ReadCounter); ok {
		counts = append(counts, prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "penguin", Subsystem: "engine", Name: "store_reads_total",
			Help: "Statements the session store ran on its reader connections (SQLite only).",
		}, func() float64 { return float64(c.Reads()) }))
	}
	for _, c := range counts {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register the store's metrics: %w", err)
		}
	}
	return nil
}
