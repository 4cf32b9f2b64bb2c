package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"sync"
	"time"

	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
	"github.com/penguin-agent/penguin/services/llm"
)

// serveEngine runs the engine service alone: `penguin serve engine
// --listen ADDR --llm ADDR --environment ADDR --store URL`. It reaches the
// llm and environment services over gRPC with the process's token. On
// SIGINT/SIGTERM it stops taking new calls, aborts the running tasks so
// each records its state (the abort event and its carry-over) in the
// store, and then stops.
func serveEngine(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin serve engine", flag.ContinueOnError)
	common := addServerFlags(fs, "127.0.0.1:7423")
	llmAddr := fs.String("llm", "127.0.0.1:7421", "address of the llm service")
	envAddr := fs.String("environment", "127.0.0.1:7422", "address of the environment service")
	storeURL := fs.String("store", "", "session store: a SQLite path (or sqlite: URL) or a postgres:// URL (default: penguin.db in the data directory)")
	agentDir := fs.String("agent-state", "", "the default agent's state directory (default: agents/default in the data directory)")
	home := fs.String("home", "", "Penguin's data directory, for the defaults of --store and --agent-state")
	advertise := fs.String("advertise", "", "the address other engine replicas reach this one at, recorded in run leases (default: --listen)")
	leaseTTL := fs.Duration("lease-ttl", 30*time.Second, "how long a run's lease outlives its replica: after a crash, the session can run elsewhere once this has passed")
	if err := config.Parse(fs, args, os.LookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve engine: unexpected arguments %q", fs.Args())
	}
	if *leaseTTL < time.Second {
		return fmt.Errorf("serve engine: --lease-ttl %s is too short; give at least 1s", *leaseTTL)
	}
	ef := &embeddedFlags{home: *home, storeURL: *storeURL, agentState: *agentDir}
	_, storeTarget, agentState, err := ef.resolved()
	if err != nil {
		return fmt.Errorf("serve engine: %w", err)
	}

	p, err := newServerProcess(ctx, "engine", common, nil)
	if err != nil {
		return fmt.Errorf("serve engine: %w", err)
	}
	defer p.Close(ctx)

	if _, err := agentstate.Init(agentState); err != nil {
		return fmt.Errorf("serve engine: %w", err)
	}
	st, err := store.Open(ctx, storeTarget, store.WithLogger(p.log))
	if err != nil {
		return fmt.Errorf("serve engine: open the session store: %w", err)
	}
	defer st.Close()

	// The engine sends whole histories to the llm service.
	big := grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(llm.DefaultMaxRequestBytes), grpc.MaxCallSendMsgSize(llm.DefaultMaxRequestBytes))
	llmConn, err := p.dial(*llmAddr, big)
	if err != nil {
		return fmt.Errorf("serve engine: llm: %w", err)
	}
	defer llmConn.Close()
	// --environment may name several replicas (a headless Service, one
	// address per pod): new environments are spread over them, and each
	// session then talks to its own replica at the address it advertised.
	envConn, err := p.dial(*envAddr, big, grpc.WithDefaultServiceConfig(`{"loadBalancingConfig":[{"round_robin":{}}]}`))
	if err != nil {
		return fmt.Errorf("serve engine: environment: %w", err)
	}
	defer envConn.Close()

	lis, mlis, err := p.listeners()
	if err != nil {
		return err
	}
	addr := *advertise
	if addr == "" {
		addr = lis.Addr().String()
	}
	dialed := map[string]*grpc.ClientConn{}
	defer func() {
		for _, c := range dialed {
			c.Close()
		}
	}()
	mgr, err := session.New(session.Options{
		Store:       st,
		LLM:         penguinv1.NewLLMServiceClient(llmConn),
		Environment: penguinv1.NewEnvironmentServiceClient(envConn),
		// An environment replica that asks to be reached at its own
		// address gets a connection of its own (the manager caches it).
		DialEnvironment: func(a string) (penguinv1.EnvironmentServiceClient, error) {
			c, err := p.dial(a, big)
			if err != nil {
				return nil, err
			}
			dialed[a] = c
			return penguinv1.NewEnvironmentServiceClient(c), nil
		},
		DefaultAgentState: agentState,
		Logger:            p.log,
		Address:           addr,
		LeaseTTL:          *leaseTTL,
		TracerProvider:    p.tel.TracerProvider,
		Registerer:        p.metrics,
	})
	if err != nil {
		return errors.Join(fmt.Errorf("serve engine: %w", err), lis.Close(), closeIf(mlis))
	}
	srv, err := p.newServer()
	if err != nil {
		return errors.Join(err, lis.Close(), closeIf(mlis))
	}
	// Calls for a run another replica owns go to that replica.
	peers := &enginePeers{dial: p.dial}
	defer peers.Close()
	penguinv1.RegisterEngineServiceServer(srv.GRPC(), engine.New(mgr, p.log, engine.WithForwarding(engine.Forwarding{
		Owners: mgr, Peers: peers, Self: addr, Observe: mgr.ObserveForward,
	})))
	srv.OnShutdown(func(ctx context.Context) {
		if err := mgr.Shutdown(ctx); err != nil {
			p.log.Warn("engine shutdown", "error", err)
		}
	})
	p.log.Info("engine service listening", "addr", lis.Addr().String(), "advertise", addr, "llm", *llmAddr, "environment", *envAddr,
		"store", redactURL(storeTarget), "agent_state", agentState, "auth", p.token != "")
	return p.serve(ctx, srv, lis, mlis)
}

// enginePeers dials other engine replicas on demand, with this process's
// token and tracing, and keeps one connection per address.
type enginePeers struct {
	dial func(target string, opts ...grpc.DialOption) (*grpc.ClientConn, error)

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
}

// Peer implements engine.Peers.
func (e *enginePeers) Peer(addr string) (penguinv1.EngineServiceClient, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if c := e.conns[addr]; c != nil {
		return penguinv1.NewEngineServiceClient(c), nil
	}
	c, err := e.dial(addr)
	if err != nil {
		return nil, err
	}
	if e.conns == nil {
		e.conns = map[string]*grpc.ClientConn{}
	}
	e.conns[addr] = c
	return penguinv1.NewEngineServiceClient(c), nil
}

// Close closes every connection.
func (e *enginePeers) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for addr, c := range e.conns {
		_ = c.Close()
		delete(e.conns, addr)
	}
}
