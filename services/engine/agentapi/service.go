// Package agentapi serves AgentService: what an agent is made of (its
// configuration, AGENTS.md, skills, memory, vault, MCP servers and model)
// read and changed through the engine's store, per project. Every change
// is one conditional write of the store (see store.AgentStore): it
// applies whole or not at all, and a file that changed since the caller
// read it answers ABORTED with its current version. The engine replicas'
// working copies (package agentmirror) pick a change up at their next
// task.
//
// Validation is the engine's own (package agentstate's strict YAML checks
// with line numbers, its skill and memory rules, the vault's names); this
// package adds the bounds of what a caller may upload and never echoes a
// vault value, in a response, an error or a log line.
package agentapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Options configure a Server.
type Options struct {
	// Store holds the agents. Required.
	Store store.AgentStore
	// LLM answers TestModel; nil answers it UNAVAILABLE.
	LLM penguinv1.LLMServiceClient
	// Environment creates the environments TestMCPServer connects in;
	// nil answers it UNAVAILABLE.
	Environment penguinv1.EnvironmentServiceClient
	// SkillLibrary is the directory on the engine's host that
	// InstallSkill's server_dir may name skills in; empty refuses
	// server_dir.
	SkillLibrary string
	// ModelSettings keeps projects' model settings; nil answers their
	// RPCs UNAVAILABLE.
	ModelSettings store.ModelSettingsStore
	// Guard checks the caller's access to a request's project; nil
	// knows only the default project and checks nothing.
	Guard *access.Guard
	// Logger receives one line per change; nil discards.
	Logger *slog.Logger
}

// Server implements penguinv1.AgentServiceServer.
type Server struct {
	penguinv1.UnimplementedAgentServiceServer
	opts Options
	log  *slog.Logger
}

// New returns a Server.
func New(opts Options) *Server {
	return &Server{opts: opts, log: logger.OrDiscard(opts.Logger)}
}

// project returns the project a request addresses, the one it names or
// the default one, once the caller may act on it at lvl (the engine's
// access guard; without one, as in a test of this package alone, only the
// default project exists). It is the one place that decides it.
func (s *Server) project(ctx context.Context, named string, lvl access.Level) (string, error) {
	p := named
	if p == "" {
		p = agentmirror.Project()
	}
	if s.opts.Guard == nil {
		if p != agentmirror.DefaultProject {
			return "", status.Errorf(codes.NotFound, "project %q does not exist", named)
		}
		return p, nil
	}
	if err := s.opts.Guard.Check(ctx, p, lvl, "project", p); err != nil {
		return "", err
	}
	return p, nil
}

// target is the agent a request addresses.
type target struct{ project, agent string }

type agentRequest interface {
	GetProject() string
	GetAgent() string
}

// targetOf checks a request's project, the caller's access to it at lvl,
// and its agent name.
func (s *Server) targetOf(ctx context.Context, req agentRequest, lvl access.Level) (target, error) {
	p, err := s.project(ctx, req.GetProject(), lvl)
	if err != nil {
		return target{}, err
	}
	if err := agentmirror.ValidName(req.GetAgent()); err != nil {
		return target{}, invalid("agent", "%v", err)
	}
	return target{p, req.GetAgent()}, nil
}

// invalid is an INVALID_ARGUMENT error naming the request's field.
func invalid(field, format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, "%s: %s", field, fmt.Sprintf(format, args...))
}

// fail turns a store error into a status. A conflict says the current
// version, for the caller to read again.
func fail(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	var conflict *store.AgentConflict
	switch {
	case errors.As(err, &conflict):
		return status.Errorf(codes.Aborted, "%s; read it again (version %d) and retry", conflict.Error(), conflict.Current)
	case errors.Is(err, store.ErrNotFound):
		return status.Error(codes.NotFound, strings.TrimPrefix(err.Error(), "get agent: "))
	case errors.Is(err, store.ErrConflict):
		return status.Error(codes.AlreadyExists, err.Error())
	case errors.Is(err, store.ErrInvalid):
		return status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "the call was cancelled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "the call's deadline passed")
	}
	return status.Errorf(codes.Unavailable, "the agent store: %v", err)
}

// files reads an agent: its version and its files by path.
func (s *Server) files(ctx context.Context, t target) (store.Agent, map[string]store.AgentFile, error) {
	a, list, err := s.opts.Store.ReadAgent(ctx, t.project, t.agent)
	if err != nil {
		return store.Agent{}, nil, fail(err)
	}
	m := make(map[string]store.AgentFile, len(list))
	for _, f := range list {
		m[f.Path] = f
	}
	return a, m, nil
}

// change applies changes to an agent and logs what changed (paths only).
func (s *Server) change(ctx context.Context, t target, what string, changes []store.AgentChange) (store.Agent, error) {
	a, err := s.opts.Store.ChangeAgent(ctx, t.project, t.agent, changes)
	if err != nil {
		return store.Agent{}, fail(err)
	}
	s.log.Info("agent changed", "project", t.project, "agent", t.agent, "change", what, "files", len(changes), "version", a.Version)
	return a, nil
}

// underPrefix returns the paths of files under a directory prefix, sorted.
func underPrefix(files map[string]store.AgentFile, prefix string) []string {
	var out []string
	for p := range files {
		if strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

func agentInfo(a store.Agent) *penguinv1.AgentInfo {
	return &penguinv1.AgentInfo{Project: a.Project, Name: a.Name, Version: a.Version, UpdatedAt: timestamppb.New(a.UpdatedAt)}
}

// asStatus reports whether err carries a gRPC status.
func asStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus(), true
	}
	return nil, false
}
