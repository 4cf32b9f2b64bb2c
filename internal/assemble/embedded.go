package assemble

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"

	"google.golang.org/grpc"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Embedded is an all-in-one server inside a client command (`penguin run`,
// `chat`, `sessions` without --engine): on a loopback port with a random
// token, so other users of the machine cannot use it, and called through
// the in-process channel. Its tasks end with it, since nothing would
// take them over.
type Embedded struct {
	// Engine, LLM, Agents and Schedules call the server's services. The
	// server fires no schedules (it is short-lived); `penguin serve`
	// does.
	Engine    penguinv1.EngineServiceClient
	LLM       penguinv1.LLMServiceClient
	Agents    penguinv1.AgentServiceClient
	Schedules penguinv1.ScheduleServiceClient
	// Conn is the in-process connection they use, for the server's
	// other services (users, projects, tokens).
	Conn   grpc.ClientConnInterface
	cancel context.CancelFunc
	done   chan error
}

// StartEmbedded builds the process cfg describes (its services, logger and
// version; the address, token and gateway are the embedded server's own)
// and serves it until Stop. It does not end with ctx.
func StartEmbedded(ctx context.Context, cfg Config) (*Embedded, error) {
	if cfg.Engine == nil {
		return nil, errors.New("assemble: an embedded server runs an engine")
	}
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	cfg.Listen, cfg.Listener, cfg.AuthToken, cfg.Gateway = "127.0.0.1:0", nil, hex.EncodeToString(raw[:]), nil
	eng := *cfg.Engine
	eng.Transient = true
	cfg.Engine = &eng
	p, err := New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	e := &Embedded{
		Engine: penguinv1.NewEngineServiceClient(p.Local()), LLM: penguinv1.NewLLMServiceClient(p.Local()),
		Agents: penguinv1.NewAgentServiceClient(p.Local()), Schedules: penguinv1.NewScheduleServiceClient(p.Local()),
		Conn:   p.Local(),
		cancel: cancel, done: make(chan error, 1),
	}
	go func() { e.done <- p.Serve(sctx) }()
	return e, nil
}

// Stop shuts the server down gracefully and waits for it.
func (e *Embedded) Stop() error {
	e.cancel()
	return <-e.done
}
