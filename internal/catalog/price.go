package catalog

import (
	"fmt"
	"math"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// FromPrice returns the Cost a price given over the API stands for, or an
// error naming the field (under field) that is not a finite number of
// zero or more. A nil price is a nil Cost. The engine checks a project's
// price with it when it is set, and the gateway again when a request
// carries it, so both refuse the same prices.
func FromPrice(field string, p *penguinv1.ModelPrice) (*Cost, error) {
	if p == nil {
		return nil, nil
	}
	check := func(name string, v float64) error {
		if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
			return fmt.Errorf("%s.%s: %v is not a price: give USD per million tokens, zero or more", field, name, v)
		}
		return nil
	}
	for _, f := range []struct {
		name string
		v    *float64
	}{{"input", &p.Input}, {"output", &p.Output}, {"cache_read", p.CacheRead}, {"cache_write", p.CacheWrite}} {
		if f.v != nil {
			if err := check(f.name, *f.v); err != nil {
				return nil, err
			}
		}
	}
	return &Cost{Input: p.GetInput(), Output: p.GetOutput(), CacheRead: p.CacheRead, CacheWrite: p.CacheWrite}, nil
}
