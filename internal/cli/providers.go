package cli

import (
	"context"
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// ProviderWarnings asks the llm service for its provider routes and
// returns a warning for each whose key variable is not set (its requests
// would fail until it is), so a typo in a providers file is seen before
// the first request. It returns nothing when the list cannot be had: the
// task says then what is wrong.
func ProviderWarnings(ctx context.Context, llm penguinv1.LLMServiceClient) []string {
	if llm == nil {
		return nil
	}
	resp, err := llm.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
	if err != nil {
		return nil
	}
	var out []string
	for _, p := range resp.GetProviders() {
		if name, ok := strings.CutPrefix(p.GetCredentialSource(), "env "); ok && !p.GetHasCredential() {
			out = append(out, fmt.Sprintf("warning: provider %s takes its key from %s, which is not set: its requests will fail until it is", p.GetName(), name))
		}
	}
	return out
}
