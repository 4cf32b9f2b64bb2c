package llm_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// A request's price (a project's, for a local model) is what the usage's
// cost is computed with; a price that is not a number of zero or more is
// refused, naming its field, before the provider is asked.
func TestRequestPriceOverridesTheTable(t *testing.T) {
	turn := emulator.Turn{Text: "ok", Usage: emulator.Usage{Input: 1_000_000, Output: 500_000}}
	e := start(t, emulator.Script{Turns: []emulator.Turn{turn}}, options{})
	cost := func(r []*penguinv1.StreamGenerateResponse) *float64 {
		for _, f := range r {
			if tu := f.GetMessage().GetTokenUsage(); tu != nil {
				return tu.GetRequest().CostUsd
			}
		}
		return nil
	}
	req := genRequest("emu-openai", "local-7b")
	req.Price = &penguinv1.ModelPrice{Input: 2, Output: 4}
	res := e.call(t, req)
	if c := cost(res.Frames); c == nil || math.Abs(*c-4) > 1e-9 {
		t.Fatalf("cost with the request's price (1M input at 2, 0.5M output at 4): %v, want 4", c)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	bad := genRequest("emu-openai", "local-7b")
	bad.Price = &penguinv1.ModelPrice{Input: 1, Output: -3}
	s, err := e.client.StreamGenerate(ctx, bad)
	if err == nil {
		_, err = s.Recv()
	}
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "price.output") {
		t.Fatalf("a negative price: %v; want INVALID_ARGUMENT naming price.output", err)
	}
}
