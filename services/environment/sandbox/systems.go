package sandbox

import (
	"fmt"
	"runtime"
)

// Unavailable lists, one sentence each, what the sandbox does on Linux
// that this system does not. The environment service logs each on its
// first lines and returns them in every DescribeWorkspace answer, so that
// nothing missing goes unsaid. What a particular Linux host lacks
// (Landlock, a cgroup controller, root) Check says instead, for the
// policy that needs it.
func Unavailable() []string { return unavailableOn(runtime.GOOS) }

// unavailableOn is Unavailable for the system goos, so that every
// system's list is tested on any.
func unavailableOn(goos string) []string {
	switch goos {
	case "linux":
		return nil
	case "darwin":
		// macOS confines commands with Seatbelt, which covers writes,
		// reads of hidden paths and the network, and nothing else.
		return []string{
			"resource limits (processes, memory, CPU weight, file size) are not enforced on macOS: they need Linux cgroups",
			"confined commands run as the service's own user on macOS, not as a separate sandbox user",
			"commands are tracked by process group on macOS: a daemon that leaves its group outlives its command and its environment",
			"confined commands on macOS cannot reach servers they start on the loopback (Seatbelt cannot tell them from the service's own ports); on Linux each environment has a loopback of its own",
		}
	}
	out := []string{
		fmt.Sprintf("commands cannot be confined on %s: sandbox modes workspace-write and read-only, and network none or proxy, are refused (they need Linux or macOS); use sandbox mode none with the host's network", goos),
		fmt.Sprintf("resource limits (processes, memory, CPU weight, file size) are not enforced on %s: they need Linux cgroups", goos),
	}
	if goos == "windows" {
		out = append(out, "commands are tracked on Windows as a process and its descendants, found through their parents: a process whose parent exited is found no more, and outlives its command and its environment")
	} else {
		out = append(out, fmt.Sprintf("commands are tracked by process group on %s: a daemon that leaves its group outlives its command and its environment", goos))
	}
	return out
}

// refuseConfined is the check of a system on which this package confines
// nothing (Windows): every policy that isolates anything is refused, as
// a sandbox is never weakened, and the error says what to ask for instead.
func refuseConfined(goos string, p Policy) error {
	if p.Mode != None {
		return fmt.Errorf("%w: sandbox mode %s cannot be enforced on %s (Penguin confines commands on Linux and macOS only); use sandbox mode none", ErrUnsupported, p.Mode, goos)
	}
	if p.Network != NetworkHost {
		return fmt.Errorf("%w: network %s cannot be enforced on %s (Penguin takes the network away on Linux and macOS only); use network host with sandbox mode none", ErrUnsupported, p.Network, goos)
	}
	return nil
}
