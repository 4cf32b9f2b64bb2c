//go:build !unix

package filestamp

import "os"

// inode is 0 where the system has no inode numbers in a file's stat: the
// size and modification time stand alone.
func inode(os.FileInfo) uint64 { return 0 }
