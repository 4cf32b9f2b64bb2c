//go:build !linux

package resident

// dropBinaryPages does nothing where the system has no /proc/self/maps.
func dropBinaryPages() error { return nil }
