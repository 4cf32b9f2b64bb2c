package store_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if a test leaves a goroutine behind: a store
// that was closed must stop its pools, and the proxies and listeners of
// the PostgreSQL tests must be torn down.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
