//go:build !linux

package command

import "os"

// growPipe keeps the system's pipe size: only Linux lets a process set it.
func growPipe(*os.File) {}
