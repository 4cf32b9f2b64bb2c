package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/gateway"
	"github.com/penguin-agent/penguin/web"
)

// newServeCmd is `penguin serve`: the llm, environment and engine
// services in one process on one gRPC port, plus the HTTP/SSE gateway,
// with embedded defaults (SQLite in Penguin's data directory, the current
// directory as the environment's root). It is assembled by the same code
// as the services run apart; the engine reaches the other two through the
// server's in-process transport instead of the network. Its subcommands
// run one service each.
func newServeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "run the llm, environment and engine services in one process",
		Long: `Runs the llm, environment and engine services in one process on one gRPC
port, plus the HTTP/SSE gateway. "penguin serve llm|environment|engine" runs
one service alone.`,
		Args: unknownCommand,
	}
	fs := cmd.Flags()
	common := addServerFlags(fs, "127.0.0.1:7420")
	gw := addGatewayFlags(fs)
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
		p, err := assemble.New(ctx, cfg)
		if err != nil {
			return fmt.Errorf("serve: %w", err)
		}
		front, err := gw.start(p, cfg)
		if err != nil {
			return errors.Join(err, p.Close())
		}
		return p.Serve(ctx, front...)
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
	llmCfg := f.llm.config()
	if llmCfg.ProvidersFile == "" {
		// The providers file of the data directory, which the web app
		// writes; it need not exist, and is picked up once it does.
		llmCfg.ProvidersFile = filepath.Join(home, "providers.yaml")
	}
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

// gatewayFlags configure the HTTP/SSE gateway of `penguin serve`.
type gatewayFlags struct {
	listen    string
	heartbeat time.Duration
}

func addGatewayFlags(fs *pflag.FlagSet) *gatewayFlags {
	f := &gatewayFlags{}
	fs.StringVar(&f.listen, "http-listen", "127.0.0.1:7480", "address of the HTTP/SSE gateway; empty turns it off")
	fs.DurationVar(&f.heartbeat, "sse-heartbeat", 20*time.Second, "interval of the SSE heartbeat comments")
	return f
}

// start opens the gateway's listener and returns the function that serves
// it in front of p's engine, or nothing when the gateway is off. This is
// the one place the gateway is built.
func (f *gatewayFlags) start(p *assemble.Process, cfg assemble.Config) ([]func(context.Context) error, error) {
	if f.listen == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", f.listen)
	if err != nil {
		return nil, fmt.Errorf("serve: http: %w", err)
	}
	gw := gateway.New(penguinv1.NewEngineServiceClient(p.Local()), gateway.Options{
		AuthToken: cfg.AuthToken, Heartbeat: f.heartbeat, Logger: cfg.Logger,
		LLM: penguinv1.NewLLMServiceClient(p.Local()), Agents: penguinv1.NewAgentServiceClient(p.Local()), ProvidersFile: cfg.LLM.ProvidersFile, App: web.App(),
	})
	return []func(context.Context) error{func(ctx context.Context) error { return serveHTTP(ctx, lis, gw, cfg.Logger) }}, nil
}

// serveHTTP serves h on lis until ctx ends, then shuts it down, cutting
// SSE streams that are still open after a few seconds.
func serveHTTP(ctx context.Context, lis net.Listener, h http.Handler, log *slog.Logger) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	log.Info("HTTP gateway listening", "addr", lis.Addr().String())
	select {
	case err := <-served:
		return fmt.Errorf("http gateway: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(shutdownCtx)
	if errors.Is(err, context.DeadlineExceeded) {
		err = srv.Close()
	}
	if serveErr := <-served; !errors.Is(serveErr, http.ErrServerClosed) {
		err = errors.Join(err, serveErr)
	}
	if err != nil {
		return fmt.Errorf("http gateway: shut down: %w", err)
	}
	return nil
}

// embedded is an all-in-one server inside a client command, on a loopback
// port with a random token, so other users of the machine cannot use it.
// The command calls its engine and llm services through the in-process
// transport.
type embedded struct {
	engine   penguinv1.EngineServiceClient
	llm      penguinv1.LLMServiceClient
	agents   penguinv1.AgentServiceClient
	agentDir string
	// logPath is the file the server logs to.
	logPath  string
	cancel   context.CancelFunc
	done     chan error
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
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	cfg, err := f.config(assemble.Config{
		Name: "penguin", Version: penguinVersion(), Listen: "127.0.0.1:0", AuthToken: hex.EncodeToString(raw[:]),
		Logger: log, ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		return nil, errors.Join(err, closeLog())
	}
	// This server lives as long as the command: its tasks end with it.
	cfg.Engine.Transient = true
	p, err := assemble.New(ctx, cfg)
	if err != nil {
		return nil, errors.Join(err, closeLog())
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &embedded{
		engine: penguinv1.NewEngineServiceClient(p.Local()), llm: penguinv1.NewLLMServiceClient(p.Local()),
		agents: penguinv1.NewAgentServiceClient(p.Local()), agentDir: cfg.Engine.AgentState, logPath: filepath.Join(home, embeddedLogFile),
		cancel: cancel, done: make(chan error, 1), closeLog: closeLog,
	}
	go func() { e.done <- p.Serve(sctx) }()
	return e, nil
}

// stop shuts the server down gracefully and releases what it holds.
func (e *embedded) stop() error {
	e.cancel()
	return errors.Join(<-e.done, e.closeLog())
}
