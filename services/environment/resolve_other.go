//go:build !linux

package environment

// linkFreeDir cannot tell without openat2, which is Linux's: the caller
// resolves the path the long way.
func linkFreeDir(string) bool { return false }
