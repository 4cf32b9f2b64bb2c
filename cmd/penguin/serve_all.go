package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/engine/trace"
	"github.com/penguin-agent/penguin/services/gateway"
	"github.com/penguin-agent/penguin/services/llm"
)

// serveAll is `penguin serve`: the llm, environment and engine services in
// one process on one gRPC port, plus the HTTP/SSE gateway, with embedded
// defaults (SQLite in Penguin's data directory, the current directory as
// the environment's root). The engine reaches the other two through gRPC
// clients of its own port, exactly as it reaches them when they run apart,
// so the all-in-one server runs the same code paths as a deployment.
func serveAll(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin serve", flag.ContinueOnError)
	common := addServerFlags(fs, "127.0.0.1:7420")
	httpListen := fs.String("http-listen", "127.0.0.1:7480", "address of the HTTP/SSE gateway; empty turns it off")
	heartbeat := fs.Duration("sse-heartbeat", 20*time.Second, "interval of the SSE heartbeat comments")
	ef := addEmbeddedFlags(fs)
	fs.StringVar(&ef.root, "root", "", "directory workspaces must lie under (default: the current directory)")
	if err := config.Parse(fs, args, os.LookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve: unexpected arguments %q", fs.Args())
	}
	p, err := newServerProcess(ctx, "penguin", common, nil)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer p.Close(ctx)

	lis, mlis, err := p.listeners()
	if err != nil {
		return err
	}
	var hlis net.Listener
	if *httpListen != "" {
		if hlis, err = net.Listen("tcp", *httpListen); err != nil {
			return errors.Join(fmt.Errorf("serve: http: %w", err), lis.Close(), closeIf(mlis))
		}
	}
	all, err := buildAllInOne(ctx, p, ef, lis.Addr().String())
	if err != nil {
		return errors.Join(err, lis.Close(), closeIf(mlis), closeIf(hlis))
	}
	defer all.close()

	var extra []func(context.Context) error
	httpAddr := ""
	if hlis != nil {
		httpAddr = hlis.Addr().String()
		gw := gateway.New(all.engineClient, gateway.Options{
			AuthToken: p.token, Heartbeat: *heartbeat, Encode: trace.Marshal, Logger: p.log,
		})
		extra = append(extra, func(ctx context.Context) error { return serveHTTP(ctx, hlis, gw, p.log) })
	}
	p.log.Info("penguin listening", "grpc", lis.Addr().String(), "http", httpAddr,
		"store", redactURL(all.storeDesc), "root", all.root, "auth", p.token != "")
	return p.serve(ctx, all.srv, lis, mlis, extra...)
}

func closeIf(l net.Listener) error {
	if l == nil {
		return nil
	}
	return l.Close()
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

// embeddedFlags configure the all-in-one server, whether `penguin serve`
// runs it or a client command embeds it.
type embeddedFlags struct {
	home       string
	storeURL   string
	agentState string
	root       string
	llm        *llmFlags
	// llmOptional starts the server even when no provider is configured,
	// for commands that never call a model.
	llmOptional bool
}

func addEmbeddedFlags(fs *flag.FlagSet) *embeddedFlags {
	f := &embeddedFlags{}
	fs.StringVar(&f.home, "home", "", "Penguin's data directory (default: ~/.local/share/penguin, or $XDG_DATA_HOME/penguin)")
	fs.StringVar(&f.storeURL, "store", "", "session store: a SQLite path or sqlite: URL, or a postgres:// URL (default: penguin.db in the data directory)")
	fs.StringVar(&f.agentState, "agent-state", "", "the default agent's state directory (default: agents/default in the data directory)")
	f.llm = addLLMFlags(fs)
	return f
}

// resolved returns the data directory, the store URL and the agent state
// directory, with their defaults filled in.
func (f *embeddedFlags) resolved() (home, storeURL, agentDir string, err error) {
	home = f.home
	if home == "" {
		home = defaultHome()
	}
	if home, err = filepath.Abs(home); err != nil {
		return "", "", "", fmt.Errorf("data directory: %w", err)
	}
	storeURL = f.storeURL
	if storeURL == "" {
		storeURL = filepath.Join(home, "penguin.db")
	}
	agentDir = f.agentState
	if agentDir == "" {
		agentDir = filepath.Join(home, "agents", "default")
	}
	return home, storeURL, agentDir, nil
}

// allInOne is the three services on one gRPC server.
type allInOne struct {
	srv          *grpcserver.Server
	engineClient penguinv1.EngineServiceClient
	storeDesc    string
	root         string
	agentDir     string
	closers      []func() error
}

// close releases what the services hold once the server has stopped.
func (a *allInOne) close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	return errors.Join(errs...)
}

// buildAllInOne builds the llm, environment and engine services on one
// server of p that will listen at addr, the address the engine dials to
// reach the other two.
func buildAllInOne(ctx context.Context, p *serverProcess, f *embeddedFlags, addr string) (_ *allInOne, err error) {
	home, storeURL, agentDir, err := f.resolved()
	if err != nil {
		return nil, err
	}
	root := f.root
	if root == "" {
		root = "."
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, fmt.Errorf("root: %w", err)
	}
	a := &allInOne{root: root, agentDir: agentDir, storeDesc: storeURL}
	defer func() {
		if err != nil {
			err = errors.Join(err, a.close())
		}
	}()
	if err := os.MkdirAll(home, 0o700); err != nil {
		return nil, fmt.Errorf("data directory: %w", err)
	}
	if _, err := agentstate.Init(agentDir); err != nil {
		return nil, err
	}

	llmSvc, err := f.llm.setup(p)
	switch {
	case err != nil && f.llmOptional:
		// `penguin sessions` reads and deletes sessions; it needs no model.
		p.log.Debug("no llm service in this embedded server", "error", err)
		llmSvc = nil
	case err != nil:
		return nil, err
	}
	envSvc, closeEnv, err := newEnvironmentService(ctx, p, root)
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, closeEnv)

	// The engine talks to llm and environment through this process's own
	// port, with the same clients it uses when they run elsewhere.
	self, err := p.dial(addr, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(llm.DefaultMaxRequestBytes), grpc.MaxCallSendMsgSize(llm.DefaultMaxRequestBytes)))
	if err != nil {
		return nil, err
	}
	a.closers = append(a.closers, self.Close)

	st, err := store.Open(ctx, storeURL, store.WithLogger(p.log))
	if err != nil {
		return nil, fmt.Errorf("open the session store: %w", err)
	}
	a.closers = append(a.closers, st.Close)

	mgr, err := session.New(session.Options{
		Store:             st,
		LLM:               penguinv1.NewLLMServiceClient(self),
		Environment:       penguinv1.NewEnvironmentServiceClient(self),
		DefaultAgentState: agentDir,
		Logger:            p.log,
		Address:           addr,
		TracerProvider:    p.tel.TracerProvider,
		Registerer:        p.metrics,
	})
	if err != nil {
		return nil, err
	}

	srv, err := p.newServer(grpc.MaxRecvMsgSize(llm.DefaultMaxRequestBytes))
	if err != nil {
		return nil, err
	}
	if llmSvc != nil {
		penguinv1.RegisterLLMServiceServer(srv.GRPC(), llmSvc)
	}
	penguinv1.RegisterEnvironmentServiceServer(srv.GRPC(), envSvc)
	penguinv1.RegisterEngineServiceServer(srv.GRPC(), engine.New(mgr, p.log))
	// First the engine aborts its tasks, so each records how it ended;
	// then the environments and their processes go.
	srv.OnShutdown(func(ctx context.Context) {
		if err := mgr.Shutdown(ctx); err != nil {
			p.log.Warn("engine shutdown", "error", err)
		}
	})
	srv.OnShutdown(func(context.Context) { _ = closeEnv() })
	a.srv = srv
	a.engineClient = penguinv1.NewEngineServiceClient(self)
	return a, nil
}

// embedded is an all-in-one server inside a client command, on a loopback
// port with a random token, so other users of the machine cannot use it.
type embedded struct {
	p      *serverProcess
	addr   string
	cancel context.CancelFunc
	done   chan error
	all    *allInOne
}

// startEmbedded starts the all-in-one server on 127.0.0.1 at a free port.
// It does not end with ctx: the caller stops it.
func startEmbedded(ctx context.Context, f *embeddedFlags) (*embedded, error) {
	if f.root == "" {
		// A client picks its workspace with --workspace, anywhere.
		f.root = string(filepath.Separator)
	}
	log, err := config.LoggerFromEnv(os.Stderr, os.LookupEnv)
	if err != nil {
		return nil, err
	}
	if _, set := os.LookupEnv(config.EnvLogLevel); !set {
		// The terminal belongs to the conversation: only problems.
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	p, err := newServerProcess(ctx, "penguin", &serverFlags{listen: "127.0.0.1:0", shutdownTimeout: 5 * time.Second}, log)
	if err != nil {
		return nil, err
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	p.token = hex.EncodeToString(raw[:])

	lis, _, err := p.listeners()
	if err != nil {
		p.Close(ctx)
		return nil, err
	}
	all, err := buildAllInOne(ctx, p, f, lis.Addr().String())
	if err != nil {
		p.Close(ctx)
		return nil, errors.Join(err, lis.Close())
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &embedded{p: p, addr: lis.Addr().String(), cancel: cancel, done: make(chan error, 1), all: all}
	go func() { e.done <- p.serve(sctx, all.srv, lis, nil) }()
	return e, nil
}

// dial connects to the embedded server.
func (e *embedded) dial() (*grpc.ClientConn, error) { return e.p.dial(e.addr) }

// stop shuts the server down gracefully and releases what it holds.
func (e *embedded) stop() error {
	e.cancel()
	err := <-e.done
	err = errors.Join(err, e.all.close())
	e.p.Close(context.Background())
	return err
}
