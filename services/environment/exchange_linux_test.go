package environment_test

import (
	"testing"

	"golang.org/x/sys/unix"
)

// exchangeNames returns a function that swaps two names atomically
// (renameat2 RENAME_EXCHANGE), so that each always exists.
func exchangeNames(*testing.T) func(a, b string) error {
	return func(a, b string) error {
		return unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	}
}
