package agentapi

import (
	"context"
	"maps"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// maxVaultValue bounds one vault value.
const maxVaultValue = 64 << 10

// vault reads an agent's vault: the file it lives in (PenguinHarness's
// .vault.toml when the agent has one with keys, else .vault.yaml), its
// version and its values. An error never carries a value: a vault that
// does not parse is reported by file and line only.
func (s *Server) vault(ctx context.Context, t target) (string, int64, map[string]string, error) {
	_, files, err := s.files(ctx, t)
	if err != nil {
		return "", 0, nil, err
	}
	name := agentmirror.VaultFile
	if _, ok := files[agentmirror.ReferenceVaultFile]; ok {
		name = agentmirror.ReferenceVaultFile
	}
	f := files[name]
	values, err := agentstate.ParseVault(name, f.Data)
	if err != nil {
		return "", 0, nil, status.Errorf(codes.FailedPrecondition, "the agent's vault %s does not parse: %v", name, err)
	}
	return name, f.Version, values, nil
}

// ListVault implements AgentService.
func (s *Server) ListVault(ctx context.Context, req *penguinv1.ListVaultRequest) (*penguinv1.ListVaultResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	_, _, values, err := s.vault(ctx, t)
	if err != nil {
		return nil, err
	}
	return &penguinv1.ListVaultResponse{Names: slices.Sorted(maps.Keys(values))}, nil
}

// SetVault implements AgentService.
func (s *Server) SetVault(ctx context.Context, req *penguinv1.SetVaultRequest) (*penguinv1.SetVaultResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := agentstate.ValidVaultKey(req.GetName()); err != nil {
		return nil, invalid("name", "%v", err)
	}
	if len(req.GetValue()) > maxVaultValue {
		return nil, invalid("value", "longer than %d bytes", maxVaultValue)
	}
	err = s.editVault(ctx, t, "vault set "+req.GetName(), func(v map[string]string) error {
		v[req.GetName()] = req.GetValue()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &penguinv1.SetVaultResponse{}, nil
}

// DeleteVault implements AgentService.
func (s *Server) DeleteVault(ctx context.Context, req *penguinv1.DeleteVaultRequest) (*penguinv1.DeleteVaultResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := agentstate.ValidVaultKey(req.GetName()); err != nil {
		return nil, invalid("name", "%v", err)
	}
	err = s.editVault(ctx, t, "vault delete "+req.GetName(), func(v map[string]string) error {
		if _, ok := v[req.GetName()]; !ok {
			return status.Errorf(codes.NotFound, "the vault has no %s", req.GetName())
		}
		delete(v, req.GetName())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &penguinv1.DeleteVaultResponse{}, nil
}

// editVault applies edit to the vault and writes it back on condition
// that it did not change meanwhile, retrying a few times when it did.
func (s *Server) editVault(ctx context.Context, t target, what string, edit func(map[string]string) error) error {
	for attempt := 0; ; attempt++ {
		name, version, values, err := s.vault(ctx, t)
		if err != nil {
			return err
		}
		if err := edit(values); err != nil {
			return err
		}
		data, err := agentstate.EncodeVault(name, values)
		if err != nil {
			return status.Error(codes.Internal, "the vault could not be encoded")
		}
		_, err = s.change(ctx, t, what, []store.AgentChange{{Path: name, Data: data, IfVersion: version}})
		if status.Code(err) != codes.Aborted || attempt == 2 {
			return err
		}
	}
}
