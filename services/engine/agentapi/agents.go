package agentapi

import (
	"context"
	"os"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// ListAgents implements AgentService.
func (s *Server) ListAgents(ctx context.Context, req *penguinv1.ListAgentsRequest) (*penguinv1.ListAgentsResponse, error) {
	p, err := s.project(ctx, req.GetProject(), access.Read)
	if err != nil {
		return nil, err
	}
	list, err := s.opts.Store.ListAgents(ctx, p)
	if err != nil {
		return nil, fail(err)
	}
	resp := &penguinv1.ListAgentsResponse{}
	for _, a := range list {
		resp.Agents = append(resp.Agents, agentInfo(a))
	}
	return resp, nil
}

// CreateAgent implements AgentService.
func (s *Server) CreateAgent(ctx context.Context, req *penguinv1.CreateAgentRequest) (*penguinv1.CreateAgentResponse, error) {
	p, err := s.project(ctx, req.GetProject(), access.Write)
	if err != nil {
		return nil, err
	}
	if err := agentmirror.ValidName(req.GetName()); err != nil {
		return nil, invalid("name", "%v", err)
	}
	var files []store.AgentFile
	if from := req.GetFromAgent(); from != "" {
		if err := agentmirror.ValidName(from); err != nil {
			return nil, invalid("from_agent", "%v", err)
		}
		_, src, err := s.files(ctx, target{p, from})
		if err != nil {
			return nil, err
		}
		for path, f := range src {
			if !strings.HasPrefix(path, agentstate.MemoryDir+"/") {
				files = append(files, store.AgentFile{Path: path, Data: f.Data})
			}
		}
	} else if files, err = template(); err != nil {
		return nil, err
	}
	a, err := s.opts.Store.CreateAgent(ctx, p, req.GetName(), files)
	if err != nil {
		return nil, fail(err)
	}
	s.log.Info("agent created", "project", p, "agent", req.GetName(), "from", req.GetFromAgent())
	return &penguinv1.CreateAgentResponse{Agent: agentInfo(a)}, nil
}

// template returns the files of a new agent, as agentstate.Init, the one
// owner of an agent's defaults, writes them.
func template() ([]store.AgentFile, error) {
	dir, err := os.MkdirTemp("", "penguin-agent-template-")
	if err != nil {
		return nil, status.Errorf(codes.Internal, "agent template: %v", err)
	}
	defer os.RemoveAll(dir)
	if _, err := agentstate.Init(dir); err != nil {
		return nil, status.Errorf(codes.Internal, "agent template: %v", err)
	}
	return readDir(dir, agentLimits, "template")
}

// RenameAgent implements AgentService.
func (s *Server) RenameAgent(ctx context.Context, req *penguinv1.RenameAgentRequest) (*penguinv1.RenameAgentResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := agentmirror.ValidName(req.GetNewName()); err != nil {
		return nil, invalid("new_name", "%v", err)
	}
	if err := s.opts.Store.RenameAgent(ctx, t.project, t.agent, req.GetNewName()); err != nil {
		return nil, fail(err)
	}
	a, err := s.opts.Store.GetAgent(ctx, t.project, req.GetNewName())
	if err != nil {
		return nil, fail(err)
	}
	s.log.Info("agent renamed", "project", t.project, "agent", t.agent, "to", req.GetNewName())
	return &penguinv1.RenameAgentResponse{Agent: agentInfo(a)}, nil
}

// DeleteAgent implements AgentService.
func (s *Server) DeleteAgent(ctx context.Context, req *penguinv1.DeleteAgentRequest) (*penguinv1.DeleteAgentResponse, error) {
	t, err := s.targetOf(ctx, req, access.Own)
	if err != nil {
		return nil, err
	}
	if err := s.opts.Store.DeleteAgent(ctx, t.project, t.agent); err != nil {
		return nil, fail(err)
	}
	s.log.Info("agent deleted", "project", t.project, "agent", t.agent)
	return &penguinv1.DeleteAgentResponse{}, nil
}

// ExportAgent implements AgentService.
func (s *Server) ExportAgent(ctx context.Context, req *penguinv1.ExportAgentRequest) (*penguinv1.ExportAgentResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	a, list, err := s.opts.Store.ReadAgent(ctx, t.project, t.agent)
	if err != nil {
		return nil, fail(err)
	}
	archive, err := packTar(list)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "pack the agent: %v", err)
	}
	if int64(len(archive)) > agentLimits.archive {
		return nil, status.Errorf(codes.FailedPrecondition, "agent %s packs into %d bytes, more than an archive may hold (%d); delete what it no longer needs (memory, skills) first", t.agent, len(archive), agentLimits.archive)
	}
	return &penguinv1.ExportAgentResponse{Archive: archive, Version: a.Version}, nil
}

// ImportAgent implements AgentService. The archive is checked whole
// (its bounds, its paths, its system_config.yaml) before anything is
// written.
func (s *Server) ImportAgent(ctx context.Context, req *penguinv1.ImportAgentRequest) (*penguinv1.ImportAgentResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	files, err := unpackTar(req.GetArchive(), agentLimits, "archive")
	if err != nil {
		return nil, err
	}
	files = stripTop(files, agentstate.ConfigFile)
	if len(files) == 0 {
		return nil, invalid("archive", "the archive holds no files")
	}
	for _, f := range files {
		if f.Path == agentstate.ConfigFile {
			if _, err := agentconfig.Parse(f.Path, f.Data); err != nil {
				return nil, invalid("archive", "%v", err)
			}
		}
	}
	a, existing, err := s.files(ctx, t)
	if status.Code(err) == codes.NotFound {
		created, err := s.opts.Store.CreateAgent(ctx, t.project, t.agent, files)
		if err != nil {
			return nil, fail(err)
		}
		s.log.Info("agent imported", "project", t.project, "agent", t.agent, "files", len(files))
		return &penguinv1.ImportAgentResponse{Agent: agentInfo(created), Files: int32(len(files))}, nil
	}
	if err != nil {
		return nil, err
	}
	if !req.GetReplace() {
		return nil, status.Errorf(codes.AlreadyExists, "agent %s exists; set replace to replace its files (memory included) with the archive's", t.agent)
	}
	if req.GetVersion() != 0 && req.GetVersion() != a.Version {
		return nil, status.Errorf(codes.Aborted, "agent %s changed meanwhile: its current version is %d", t.agent, a.Version)
	}
	var changes []store.AgentChange
	incoming := map[string]bool{}
	for _, f := range files {
		incoming[f.Path] = true
		cond := store.Absent
		if old, ok := existing[f.Path]; ok {
			cond = old.Version
		}
		changes = append(changes, store.AgentChange{Path: f.Path, Data: f.Data, IfVersion: cond})
	}
	for p, old := range existing {
		if !incoming[p] {
			changes = append(changes, store.AgentChange{Path: p, Delete: true, IfVersion: old.Version})
		}
	}
	a, err = s.change(ctx, t, "import", changes)
	if err != nil {
		return nil, err
	}
	return &penguinv1.ImportAgentResponse{Agent: agentInfo(a), Files: int32(len(files))}, nil
}
