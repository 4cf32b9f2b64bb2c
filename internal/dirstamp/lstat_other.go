//go:build !linux

package dirstamp

// lstat is not implemented here: without the change time, a stamp would
// miss a file rewritten with its size and modification time kept, so no
// stamp is trusted.
func lstat(path, rel string) (entry, bool) { return entry{}, false }
