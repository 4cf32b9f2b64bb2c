package session

import (
	"context"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// modelsNamed is how many of a route's models an unknown-model error
// names.
const modelsNamed = 12

// ModelError is a model CheckModel refuses, and why; it is an ErrInvalid.
type ModelError struct{ Reason string }

func (e *ModelError) Error() string { return e.Reason }

// Unwrap makes a refused model an invalid argument.
func (e *ModelError) Unwrap() error { return ErrInvalid }

// CheckModel refuses a model that project cannot call: a provider route
// the gateway has neither globally nor for the project (a route of
// another project among them), or a model id that a route listing its
// models does not list. A route that lists no models (a local server)
// takes any id. Work that runs with no one watching (a schedule) is
// checked when it is saved, not when it first fires. A refused model is a
// *ModelError; any other error says the gateway could not be asked.
func (m *Manager) CheckModel(ctx context.Context, project string, ref *penguinv1.ModelRef) error {
	resp, err := m.opts.LLM.ListModels(ctx, &penguinv1.ListModelsRequest{Provider: ref.GetProvider(), Project: project})
	if status.Code(err) == codes.InvalidArgument {
		return &ModelError{Reason: status.Convert(err).Message()}
	}
	if err != nil {
		return fmt.Errorf("could not ask the llm service about model %s/%s: %w", ref.GetProvider(), ref.GetModelId(), err)
	}
	var ids []string
	for _, mi := range resp.GetModels() {
		if mi.GetModel().GetModelId() == ref.GetModelId() {
			return nil
		}
		ids = append(ids, mi.GetModel().GetModelId())
	}
	if len(ids) == 0 {
		return nil
	}
	more := ""
	if len(ids) > modelsNamed {
		ids, more = ids[:modelsNamed], fmt.Sprintf(" and %d more", len(ids)-modelsNamed)
	}
	return &ModelError{Reason: fmt.Sprintf("provider %q has no model %q; its models: %s%s (a new model is added to the route's models list)",
		ref.GetProvider(), ref.GetModelId(), strings.Join(ids, ", "), more)}
}

// modelCheck is CheckModel for a project, for the agent-file tools, which
// take no context: the gateway gets storeTimeout to answer.
func (m *Manager) modelCheck(project string) func(provider, modelID string) error {
	return func(provider, modelID string) error {
		ctx, cancel := context.WithTimeout(context.Background(), storeTimeout)
		defer cancel()
		return m.CheckModel(ctx, project, &penguinv1.ModelRef{Provider: provider, ModelId: modelID})
	}
}
