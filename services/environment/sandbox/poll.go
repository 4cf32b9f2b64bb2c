package sandbox

import (
	"context"
	"fmt"
	"time"
)

// poll calls gone with a growing interval (1 ms up to 50 ms) until it
// reports true or ctx ends. The description returned with false names what
// is still there, for the error.
func poll(ctx context.Context, gone func() (bool, string)) error {
	interval := time.Millisecond
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		ok, what := gone()
		if ok {
			return nil
		}
		t.Reset(interval)
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s still alive: %w", what, ctx.Err())
		case <-t.C:
		}
		interval = min(2*interval, 50*time.Millisecond)
	}
}
