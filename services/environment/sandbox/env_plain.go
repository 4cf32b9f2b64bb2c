//go:build !linux && !darwin

package sandbox

import (
	"fmt"
	"os/exec"
	"runtime"
)

// Unavailable lists, one sentence each, what the Linux sandbox does that
// this system does not: here, everything but running the commands.
func Unavailable() []string {
	return []string{
		fmt.Sprintf("commands cannot be confined on %s: sandbox modes workspace-write and read-only, and network none or proxy, are refused (they need Linux or macOS); use sandbox mode none with the host's network", runtime.GOOS),
		fmt.Sprintf("resource limits (processes, memory, CPU weight, file size) are not enforced on %s: they need Linux cgroups", runtime.GOOS),
	}
}

// check refuses every policy that isolates anything: this system has no
// sandbox this package can apply, and a sandbox is never weakened.
func check(p Policy) error {
	if p.Mode != None {
		return fmt.Errorf("%w: sandbox mode %s cannot be enforced on %s (Penguin confines commands on Linux and macOS only); use sandbox mode none", ErrUnsupported, p.Mode, runtime.GOOS)
	}
	if p.Network != NetworkHost {
		return fmt.Errorf("%w: network %s cannot be enforced on %s (Penguin takes the network away on Linux and macOS only); use network host with sandbox mode none", ErrUnsupported, p.Network, runtime.GOOS)
	}
	return nil
}

// host holds nothing here: environments are not isolated.
type host struct{}

func (host) start(Policy) error   { return nil }
func (host) wrap(*exec.Cmd) error { return nil }
func (host) close() error         { return nil }
