//go:build !linux

package engine_test

import "testing"

// smallTmpfs skips: a small filesystem of the test's own, to fill, is
// mounted on Linux only.
func smallTmpfs(t *testing.T) string {
	t.Skip("a small tmpfs to fill needs Linux")
	return ""
}
