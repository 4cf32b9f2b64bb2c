package agentapi

import (
	"context"
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// The bounds of a project's context window setting: below the smaller
// one no agent prompt fits; above the larger one is a typo.
const (
	minContextWindow = 1024
	maxContextWindow = 100_000_000
)

// modelSettings returns the store of projects' model settings, or
// UNAVAILABLE when the server has none.
func (s *Server) modelSettings() (store.ModelSettingsStore, error) {
	if s.opts.ModelSettings == nil {
		return nil, status.Error(codes.Unavailable, "this engine keeps no model settings")
	}
	return s.opts.ModelSettings, nil
}

// ListModelSettings implements AgentService.
func (s *Server) ListModelSettings(ctx context.Context, req *penguinv1.ListModelSettingsRequest) (*penguinv1.ListModelSettingsResponse, error) {
	project, err := s.project(ctx, req.GetProject(), access.Read)
	if err != nil {
		return nil, err
	}
	ms, err := s.modelSettings()
	if err != nil {
		return nil, err
	}
	list, err := ms.ListModelSettings(ctx, project)
	if err != nil {
		return nil, fail(err)
	}
	resp := &penguinv1.ListModelSettingsResponse{}
	for _, m := range list {
		resp.Settings = append(resp.Settings, ModelSettingsProto(m))
	}
	return resp, nil
}

// SetModelSettings implements AgentService: the settings are checked
// whole (the model's route, the window's bounds, each price) before
// anything is written.
func (s *Server) SetModelSettings(ctx context.Context, req *penguinv1.SetModelSettingsRequest) (*penguinv1.SetModelSettingsResponse, error) {
	project, err := s.project(ctx, req.GetProject(), access.Write)
	if err != nil {
		return nil, err
	}
	ms, err := s.modelSettings()
	if err != nil {
		return nil, err
	}
	set := req.GetSettings()
	m := set.GetModel()
	switch {
	case m.GetProvider() == "" || m.GetModelId() == "":
		return nil, invalid("settings.model", "give both provider and model_id")
	case set.GetContextWindow() != 0 && (set.GetContextWindow() < minContextWindow || set.GetContextWindow() > maxContextWindow):
		return nil, invalid("settings.context_window", "%d is not a context window: give 0 (none) or %d to %d tokens", set.GetContextWindow(), minContextWindow, maxContextWindow)
	}
	cost, err := catalog.FromPrice("settings.price", set.GetPrice())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := s.checkRoute(ctx, project, m); err != nil {
		return nil, status.Error(codes.InvalidArgument, "settings."+status.Convert(err).Message())
	}
	if set.GetContextWindow() == 0 && cost == nil {
		if err := ms.DeleteModelSetting(ctx, project, m.GetProvider(), m.GetModelId()); err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, fail(err)
		}
		s.log.Info("model settings removed", "project", project, "provider", m.GetProvider(), "model", m.GetModelId())
		return &penguinv1.SetModelSettingsResponse{}, nil
	}
	row := &store.ModelSetting{Project: project, Provider: m.GetProvider(), ModelID: m.GetModelId(), ContextWindow: set.GetContextWindow()}
	if cost != nil {
		row.Price = &store.Price{Input: cost.Input, Output: cost.Output, CacheRead: cost.CacheRead, CacheWrite: cost.CacheWrite}
	}
	if err := ms.PutModelSetting(ctx, row); err != nil {
		return nil, fail(err)
	}
	s.log.Info("model settings set", "project", project, "provider", m.GetProvider(), "model", m.GetModelId())
	return &penguinv1.SetModelSettingsResponse{Settings: ModelSettingsProto(row)}, nil
}

// ModelSettingsProto is a stored model setting as the API shows it.
func ModelSettingsProto(m *store.ModelSetting) *penguinv1.ModelSettings {
	out := &penguinv1.ModelSettings{
		Model:         &penguinv1.ModelRef{Provider: m.Provider, ModelId: m.ModelID},
		ContextWindow: m.ContextWindow,
	}
	if p := m.Price; p != nil {
		out.Price = &penguinv1.ModelPrice{Input: p.Input, Output: p.Output, CacheRead: p.CacheRead, CacheWrite: p.CacheWrite}
	}
	return out
}
