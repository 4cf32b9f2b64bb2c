//go:build !linux

package environment_test

import "testing"

// exchangeNames skips t: the atomic exchange of two names that the swap
// race needs (renameat2 RENAME_EXCHANGE) is Linux's.
func exchangeNames(t *testing.T) func(a, b string) error {
	t.Skip("swapping two names atomically needs Linux's renameat2")
	return nil
}
