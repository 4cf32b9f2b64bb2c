package assemble

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/gateway"
)

// GatewayConfig configures the HTTP/SSE gateway in front of the process's
// engine.
type GatewayConfig struct {
	// Listen is the HTTP address. Required.
	Listen string
	// Heartbeat is gateway.Options.Heartbeat.
	Heartbeat time.Duration
	// App is the web app's built files; nil serves the API alone.
	App fs.FS
	// TrustedProxies is gateway.Options.TrustedProxies.
	TrustedProxies []netip.Prefix
	// Listening, when set, is called with the listener's address once it
	// is open (penguin serve --open opens the browser there).
	Listening func(net.Addr)
}

// setupGateway opens the gateway's listener and builds the gateway over
// the process's own connection, when the process runs one. It calls the
// services of this process only: the engine, and the llm service (or its
// front) for the models and the provider routes.
func (p *Process) setupGateway(context.Context) error {
	gc := p.cfg.Gateway
	if gc == nil {
		return nil
	}
	lis, err := net.Listen("tcp", gc.Listen)
	if err != nil {
		return fmt.Errorf("http gateway: %w", err)
	}
	p.release = append(p.release, closeListener(&lis))
	if gc.Listening != nil {
		gc.Listening(lis.Addr())
	}
	opts := gateway.Options{
		AuthToken: p.cfg.AuthToken, Heartbeat: gc.Heartbeat, Logger: p.log, App: gc.App, TrustedProxies: gc.TrustedProxies,
		Agents: penguinv1.NewAgentServiceClient(p.local), Schedules: penguinv1.NewScheduleServiceClient(p.local),
		Accounts: penguinv1.NewAuthServiceClient(p.local), Team: p.cfg.Engine.Team,
		Users: penguinv1.NewUserServiceClient(p.local), Projects: penguinv1.NewProjectServiceClient(p.local),
		Tokens: penguinv1.NewTokenServiceClient(p.local),
		// The llm service of this process, or the front that passes the
		// users' calls on to the one the engine reaches (see llmFront).
		LLM: penguinv1.NewLLMServiceClient(p.local),
	}
	gw := gateway.New(penguinv1.NewEngineServiceClient(p.local), opts)
	p.front = append(p.front, func(ctx context.Context) error {
		l := lis
		lis = nil // the HTTP server closes it
		return serveHTTP(ctx, l, gw, p.log)
	})
	return nil
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
