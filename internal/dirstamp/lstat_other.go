//go:build !linux

package dirstamp

import "io/fs"

// lstat is not implemented here: without the change time, a stamp would
// miss a file rewritten with its size and modification time kept, so no
// stamp is trusted.
func lstat(path, rel string) (entry, bool) { return entry{}, false }

// entryOf is not implemented here either, for the same reason.
func entryOf(info fs.FileInfo) (entry, bool) { return entry{}, false }
