package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/engine"
)

// newServeEngineCmd is `penguin serve engine --listen ADDR --llm ADDR
// --environment ADDR --store URL`: the engine service alone. It reaches the
// llm and environment services over gRPC with the process's token. On
// SIGINT/SIGTERM it stops taking new calls, aborts the running tasks so
// each records its state (the abort event and its carry-over) in the
// store, and then stops.
func newServeEngineCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "engine", Short: "run the engine service (agent loop and sessions) alone", Args: noArgs}
	fs := cmd.Flags()
	common := addServerFlags(fs, "127.0.0.1:7423")
	// The gateway is off unless asked for: a deployment serves the web
	// app and the HTTP API from its engine pods (deploy/base/engine.yaml).
	gw := addGatewayFlags(fs, "")
	llmAddr := fs.String("llm", "127.0.0.1:7421", "address of the llm service")
	envAddr := fs.String("environment", "127.0.0.1:7422", "address of the environment service")
	ef := addEngineFlags(fs)
	ef.addReplicaFlags(fs)
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := common.process("engine")
		if err != nil {
			return fmt.Errorf("serve engine: %w", err)
		}
		if cfg.Engine, err = ef.config(); err != nil {
			return fmt.Errorf("serve engine: %w", err)
		}
		cfg.LLMAddr, cfg.EnvironmentAddr = *llmAddr, *envAddr
		if cfg.Gateway, err = gw.config(); err != nil {
			return fmt.Errorf("serve engine: %w", err)
		}
		cfg.Engine.Team = ef.teamMode(common.listen, gw.listen)
		return serveProcess(cmd.Context(), "serve engine", cfg)
	}
	return cmd
}

// engineFlags are the engine's own flags, shared by `penguin serve
// engine`, the all-in-one `penguin serve` and the client commands that
// embed a server: where its data lives and, for the servers, how it
// shares runs with other replicas.
type engineFlags struct {
	home       string
	storeURL   string
	agentState string
	advertise  string
	leaseTTL   time.Duration
	missed     time.Duration
	idleEnv    time.Duration
	logLinger  time.Duration
	team       bool
	oidc       oidcFlags
}

// oidcFlags configure sign-in through an identity provider
// (engine.OIDCConfig); the client secret comes from
// PENGUIN_OIDC_CLIENT_SECRET or the file --oidc-client-secret-file.
type oidcFlags struct {
	issuer, clientID, secretFile, redirectURL, name string
	domains, groups                                 []string
	groupsClaim, adminGroup                         string
}

func addEngineFlags(fs *pflag.FlagSet) *engineFlags {
	f := &engineFlags{}
	fs.StringVar(&f.home, "home", "", "Penguin's data directory, for the defaults of --store and --agent-state (default: ~/.local/share/penguin, or $XDG_DATA_HOME/penguin)")
	fs.StringVar(&f.storeURL, "store", "", "session store: a SQLite path or sqlite: URL, or a postgres:// URL (default: penguin.db in the data directory)")
	fs.StringVar(&f.agentState, "agent-state", "", "the default agent's state directory (default: agents/default in the data directory)")
	return f
}

// addReplicaFlags defines the flags of an engine server: how it shares
// its store with other replicas, and how long it keeps its sessions'
// environments. A client command's embedded server keeps the defaults.
func (f *engineFlags) addReplicaFlags(fs *pflag.FlagSet) {
	fs.StringVar(&f.advertise, "advertise", "", "the address other replicas reach this one at, recorded in run leases (default: --listen)")
	fs.DurationVar(&f.leaseTTL, "lease-ttl", engine.DefaultLeaseTTL, "how long a run's lease outlives its replica: after a crash, the session can run elsewhere once this has passed")
	fs.DurationVar(&f.missed, "schedule-missed-after", engine.DefaultScheduleMissedAfter, "how late a schedule's due time may be taken up and still run as on time; later, it was missed (every replica was down) and follows the schedule's missed policy")
	fs.BoolVar(&f.team, "team", false, "team mode on loopback too: accounts, sign-in, projects and tokens (any address beyond loopback implies it)")
	o := &f.oidc
	fs.StringVar(&o.issuer, "oidc-issuer", "", "sign-in through this OpenID Connect identity provider (its issuer URL); implies team mode")
	fs.StringVar(&o.clientID, "oidc-client-id", "", "this server's client id at the identity provider")
	fs.StringVar(&o.secretFile, "oidc-client-secret-file", "", "file holding the client secret (or set PENGUIN_OIDC_CLIENT_SECRET)")
	fs.StringVar(&o.redirectURL, "oidc-redirect-url", "", "the callback registered with the identity provider: https://<host>/api/auth/oidc/callback")
	fs.StringVar(&o.name, "oidc-name", "", "the provider's name on the sign-in page's button (default: the issuer's host name)")
	fs.StringSliceVar(&o.domains, "oidc-allowed-domains", nil, "email domains that may sign in (default: any)")
	fs.StringSliceVar(&o.groups, "oidc-allowed-groups", nil, "groups of which a user must be in one to sign in (default: any)")
	fs.StringVar(&o.groupsClaim, "oidc-groups-claim", engine.DefaultOIDCGroupsClaim, "the claim that lists a user's groups")
	fs.StringVar(&o.adminGroup, "oidc-admin-group", "", "members of this group are admins, others not, decided at each sign-in (default: the provider decides no role)")
	fs.DurationVar(&f.idleEnv, "environment-idle-timeout", engine.DefaultEnvironmentIdleTimeout, "how long a session's environment outlives its last use: it is then disposed of, ending its commands and terminals (the workspace stays), and the next tool call gets a fresh one")
	fs.DurationVar(&f.logLinger, "log-linger", 0, "how long an event of a session's log may wait to be committed with the next durability point (a tool's output, a state change, the task's end); 0 means the floor of 2ms, a few ms more saves transactions on a store across a network")
}

// dataDir returns the absolute path of Penguin's data directory: --home,
// else the default.
func (f *engineFlags) dataDir() (string, error) {
	home := f.home
	if home == "" {
		home = defaultHome()
	}
	home, err := filepath.Abs(home)
	if err != nil {
		return "", fmt.Errorf("data directory: %w", err)
	}
	return home, nil
}

// config turns the flags into the engine's Config, with the data
// directory's defaults filled in. The data directory is created here,
// readable by its owner only, before anything is written into it.
func (f *engineFlags) config() (*engine.Config, error) {
	home, err := f.dataDir()
	if err != nil {
		return nil, err
	}
	cfg := &engine.Config{StoreURL: f.storeURL, AgentState: f.agentState, Advertise: f.advertise, LeaseTTL: f.leaseTTL, EnvironmentIdleTimeout: f.idleEnv, LogLinger: f.logLinger, ScheduleMissedAfter: f.missed}
	if cfg.StoreURL == "" || cfg.AgentState == "" {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
	}
	if cfg.StoreURL == "" {
		cfg.StoreURL = filepath.Join(home, "penguin.db")
	}
	if cfg.AgentState == "" {
		cfg.AgentState = filepath.Join(home, "agents", "default")
	}
	cfg.AdminPasswordFile = filepath.Join(home, "initial-admin-password")
	cfg.SeedAdminPassword = os.Getenv("PENGUIN_SEED_ADMIN_PASSWORD")
	if cfg.OIDC, err = f.oidc.config(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// config turns the flags into the provider's configuration, reading the
// client secret; the zero Config when no issuer is given.
func (o *oidcFlags) config() (engine.OIDCConfig, error) {
	if o.issuer == "" {
		return engine.OIDCConfig{}, nil
	}
	secret, err := config.Secret(os.LookupEnv, "PENGUIN_OIDC_CLIENT_SECRET", o.secretFile)
	if err != nil {
		return engine.OIDCConfig{}, fmt.Errorf("oidc client secret: %w", err)
	}
	return engine.OIDCConfig{
		Issuer: o.issuer, ClientID: o.clientID, ClientSecret: secret, RedirectURL: o.redirectURL, Name: o.name,
		AllowedDomains: o.domains, AllowedGroups: o.groups, GroupsClaim: o.groupsClaim, AdminGroup: o.adminGroup,
	}, nil
}

// teamMode decides how a server knows its callers: team mode when --team or
// an identity provider is given, or any of the addresses it listens at (gRPC, HTTP) reaches beyond
// loopback; local mode (no sign-in, one implicit user) otherwise.
func (f *engineFlags) teamMode(listen ...string) bool {
	if f.team || f.oidc.issuer != "" {
		return true
	}
	for _, addr := range listen {
		if addr != "" && !isLoopback(addr) {
			return true
		}
	}
	return false
}

// isLoopback reports whether a listen address is on loopback only: an
// empty host (every interface) is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
