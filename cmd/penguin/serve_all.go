package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/internal/browser"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/llm"
	"github.com/penguin-agent/penguin/web"
)

// serveCommand is the name of the server's command.
const serveCommand = "serve"

// newServeCmd is `penguin serve`: the llm, environment and engine
// services in one process on one gRPC port, plus the HTTP/SSE gateway,
// with embedded defaults (SQLite in Penguin's data directory, the current
// directory as the environment's root). It is assembled by the same code
// as the services run apart; the engine reaches the other two through the
// server's in-process channel instead of the network. Its subcommands
// run one service each.
func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   serveCommand,
		Short: "run the llm, environment and engine services in one process",
		Long: `Runs the llm, environment and engine services in one process on one gRPC
port, plus the HTTP/SSE gateway. "penguin serve llm|environment|engine" runs
one service alone.`,
		Args: unknownCommand,
	}
	fs := cmd.Flags()
	common := addServerFlags(fs, "127.0.0.1:7420")
	gw := addGatewayFlags(fs, "127.0.0.1:7480")
	af := addAllInOneFlags(fs)
	af.engine.addReplicaFlags(fs)
	fs.StringVar(&af.env.Root, "root", "", "directory workspaces must lie under (default: the current directory)")
	addEnvironmentFlags(fs, &af.env)
	mustComplete(cmd, "root", cobra.FixedCompletions(nil, cobra.ShellCompDirectiveFilterDirs))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		ctx := cmd.Context()
		cfg, err := common.process("penguin")
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		af.env.HidePaths = common.secretFiles()
		if cfg, err = af.config(cfg); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		if cfg.Gateway, err = gw.config(); err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		cfg.Engine.Team = af.engine.teamMode(common.listen, gw.listen)
		return serveProcess(ctx, "serve", cfg)
	}
	cmd.AddCommand(newServeLLMCmd(), newServeEnvironmentCmd(), newServeEngineCmd())
	return cmd
}

// allInOneFlags configure the three services in one process, whether
// `penguin serve` runs it or a client command embeds it.
type allInOneFlags struct {
	llm    *llmFlags
	engine *engineFlags
	env    environment.Config
	// llmOptional starts the server even when no provider is configured,
	// for commands that never call a model.
	llmOptional bool
}

func addAllInOneFlags(fs *pflag.FlagSet) *allInOneFlags {
	return &allInOneFlags{engine: addEngineFlags(fs), llm: addLLMFlags(fs)}
}

// config adds the three services to cfg. The environments of a replica
// that advertises an address are reached at that address too.
func (f *allInOneFlags) config(cfg assemble.Config) (assemble.Config, error) {
	eng, err := f.engine.config()
	if err != nil {
		return cfg, err
	}
	env := f.env
	env.Advertise = f.engine.advertise
	home, err := f.engine.dataDir()
	if err != nil {
		return cfg, err
	}
	llmCfg, err := f.llm.config()
	if err != nil {
		return cfg, err
	}
	if llmCfg.ProvidersFile == "" {
		// The providers file of the data directory; it need not exist, and
		// is picked up once it does.
		llmCfg.ProvidersFile = filepath.Join(home, "providers.yaml")
	}
	routeStoreDefaults(llmCfg, eng.StoreURL, home)
	// The data directory (the store, the providers and their keys) and
	// the providers file are empty to confined commands.
	for _, p := range []string{home, llmCfg.ProvidersFile} {
		if abs, err := filepath.Abs(p); err == nil {
			env.HidePaths = append(env.HidePaths, abs)
		}
	}
	cfg.LLM, cfg.Environment, cfg.Engine, cfg.LLMOptional = llmCfg, &env, eng, f.llmOptional
	return cfg, nil
}

// routeStoreDefaults gives the llm service of a server that runs the
// engine beside it a route store when none is named: the engine's own
// database (the routes get a table of their own). A SQLite store is one
// machine's, so its key secret defaults to routes.key in the data
// directory, made on first use; a PostgreSQL store may be shared by
// replicas on other machines, which must all hold the same secret, so it
// has to be given (--routes-key-file or PENGUIN_ROUTES_KEY), and without
// one the server keeps no routes of its own and says so.
func routeStoreDefaults(cfg *llm.Config, engineStore, home string) {
	if cfg.RouteStore == "" {
		cfg.RouteStore = engineStore
	}
	if len(cfg.RouteSecret) > 0 {
		return
	}
	if strings.HasPrefix(cfg.RouteStore, "postgres://") || strings.HasPrefix(cfg.RouteStore, "postgresql://") {
		slog.Warn("no route key secret (--routes-key-file or " + routesKeyVar + "): provider routes can be added in the providers file only, not through the API or the web app")
		cfg.RouteStore = ""
		return
	}
	cfg.RouteKeyFile, cfg.MakeRouteKey = filepath.Join(home, "routes.key"), true
}

// gatewayFlags configure the HTTP/SSE gateway of `penguin serve`.
type gatewayFlags struct {
	listen    string
	heartbeat time.Duration
	open      bool
	proxies   []string
}

func addGatewayFlags(fs *pflag.FlagSet, listen string) *gatewayFlags {
	f := &gatewayFlags{}
	fs.StringVar(&f.listen, "http-listen", listen, "address of the HTTP/SSE gateway and the web app; empty turns it off")
	fs.DurationVar(&f.heartbeat, "sse-heartbeat", 20*time.Second, "interval of the SSE heartbeat comments")
	fs.BoolVar(&f.open, "open", false, "open the web app in the browser once the gateway listens")
	fs.StringSliceVar(&f.proxies, "http-trusted-proxies", nil, "CIDRs of the reverse proxies whose X-Forwarded-For the gateway believes when it limits each client (none: it counts the connection's address)")
	return f
}

// config is the gateway's Config, or nil when it is off.
func (f *gatewayFlags) config() (*assemble.GatewayConfig, error) {
	if f.listen == "" {
		return nil, nil
	}
	gc := &assemble.GatewayConfig{Listen: f.listen, Heartbeat: f.heartbeat, App: web.App()}
	for _, c := range f.proxies {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return nil, fmt.Errorf("--http-trusted-proxies: %q is not a CIDR such as 10.0.0.0/8", c)
		}
		gc.TrustedProxies = append(gc.TrustedProxies, p.Masked())
	}
	if f.open {
		gc.Listening = func(addr net.Addr) {
			u := appURL(addr)
			if err := browser.Open(u); err != nil {
				slog.Warn("the browser could not be opened; open the web app by hand", "url", u, "error", err)
			}
		}
	}
	return gc, nil
}

// appURL is the web app's address on the gateway's listener: on the
// loopback when it listens on every address.
func appURL(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return "http://" + addr.String() + "/"
	}
	if ip := net.ParseIP(host); ip == nil || ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port) + "/"
}

// embedded is the all-in-one server a client command starts when no
// --engine is given (assemble.Embedded), with its log file and the agent
// directory its engine reads.
type embedded struct {
	*assemble.Embedded
	agentDir string
	// logPath is the file the server logs to.
	logPath  string
	closeLog func() error
}

// startEmbedded starts the all-in-one server on 127.0.0.1 at a free port.
// It does not end with ctx: the caller stops it.
func startEmbedded(ctx context.Context, f *allInOneFlags) (*embedded, error) {
	if f.env.Root == "" {
		// A client picks its workspace with --workspace, anywhere.
		f.env.Root = string(filepath.Separator)
	}
	home, err := f.engine.dataDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	log, closeLog, err := embeddedLogger(home)
	if err != nil {
		return nil, err
	}
	cfg, err := f.config(assemble.Config{Name: "penguin", Version: penguinVersion(), Logger: log, ShutdownTimeout: 5 * time.Second})
	if err != nil {
		return nil, errors.Join(err, closeLog())
	}
	srv, err := assemble.StartEmbedded(ctx, cfg)
	if err != nil {
		return nil, errors.Join(err, closeLog())
	}
	return &embedded{Embedded: srv, agentDir: cfg.Engine.AgentState, logPath: filepath.Join(home, embeddedLogFile), closeLog: closeLog}, nil
}

// stop shuts the server down gracefully and releases what it holds.
func (e *embedded) stop() error {
	return errors.Join(e.Stop(), e.closeLog())
}
