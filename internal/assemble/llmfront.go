package assemble

import (
	"context"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// llmFront serves, in a process that runs the engine but not the llm
// service, the llm service's calls that users make: listing models and
// managing provider routes. The llm service knows no users and takes the
// service token only; the engine's Guard authorizes each call here before
// the front runs (docs/security.md, "Who sees what"), and the front passes
// it on as the operator, over the engine's own connection. Model
// generation is the services' own and is not passed on.
type llmFront struct {
	penguinv1.UnimplementedLLMServiceServer
	llm penguinv1.LLMServiceClient
}

func (f *llmFront) ListProviders(ctx context.Context, req *penguinv1.ListProvidersRequest) (*penguinv1.ListProvidersResponse, error) {
	return f.llm.ListProviders(ctx, req)
}

func (f *llmFront) ListModels(ctx context.Context, req *penguinv1.ListModelsRequest) (*penguinv1.ListModelsResponse, error) {
	return f.llm.ListModels(ctx, req)
}

func (f *llmFront) AddProvider(ctx context.Context, req *penguinv1.AddProviderRequest) (*penguinv1.AddProviderResponse, error) {
	return f.llm.AddProvider(ctx, req)
}

func (f *llmFront) UpdateProvider(ctx context.Context, req *penguinv1.UpdateProviderRequest) (*penguinv1.UpdateProviderResponse, error) {
	return f.llm.UpdateProvider(ctx, req)
}

func (f *llmFront) RemoveProvider(ctx context.Context, req *penguinv1.RemoveProviderRequest) (*penguinv1.RemoveProviderResponse, error) {
	return f.llm.RemoveProvider(ctx, req)
}

func (f *llmFront) TestProvider(ctx context.Context, req *penguinv1.TestProviderRequest) (*penguinv1.TestProviderResponse, error) {
	return f.llm.TestProvider(ctx, req)
}

func (f *llmFront) ResealProviderKeys(ctx context.Context, req *penguinv1.ResealProviderKeysRequest) (*penguinv1.ResealProviderKeysResponse, error) {
	return f.llm.ResealProviderKeys(ctx, req)
}
