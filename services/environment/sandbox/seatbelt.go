package sandbox

import (
	"fmt"
	"slices"
	"strings"
)

// SeatbeltSpec is what a macOS Seatbelt profile of one environment allows
// beyond reading: the paths its commands may write, the paths they may not
// even read, and the egress proxy's loopback port.
type SeatbeltSpec struct {
	// Mode is the policy's mode; None still denies the network when
	// Network says so.
	Mode Mode
	// Network is NetworkNone, NetworkProxy or (mode None only)
	// NetworkHost.
	Network Network
	// Writable are the absolute, symbolic-link-resolved directories the
	// commands may write beneath: the workspace (WorkspaceWrite), the
	// environment's temporary directory and the policy's writable paths.
	Writable []string
	// Hidden are the absolute, resolved paths the commands may neither
	// read nor write (the service's token file).
	Hidden []string
	// ProxyPort is the loopback port of the environment's egress proxy
	// (NetworkProxy); it is the only address the commands may connect to.
	ProxyPort int
}

// seatbeltBase is the part of every confined profile that does not depend
// on the environment. It denies by default and allows what ordinary
// programs need to start and run: executing and forking, signalling and
// inspecting processes of the same sandbox, reading files, the system
// information and the few system services that name lookup (users, not
// hosts), certificate checks and terminals use. The Mach services a
// process may look up are listed one by one: a service such as Launch
// Services would start programs outside the sandbox on request.
const seatbeltBase = `(version 1)
(deny default)
(allow process-exec)
(allow process-fork)
(allow signal (target same-sandbox))
(allow process-info* (target same-sandbox))
(allow file-read*)
(allow sysctl-read)
(allow user-preference-read)
(allow ipc-posix-sem)
(allow ipc-posix-shm-read-data)
(allow pseudo-tty)
(allow mach-lookup
  (global-name "com.apple.system.opendirectoryd.libinfo")
  (global-name "com.apple.system.notification_center")
  (global-name "com.apple.system.logger")
  (global-name "com.apple.logd")
  (global-name "com.apple.trustd")
  (global-name "com.apple.trustd.agent")
  (global-name "com.apple.SecurityServer")
  (global-name "com.apple.coreservices.quarantine-resolver"))
(allow file-write-data file-ioctl
  (literal "/dev/null")
  (literal "/dev/zero")
  (literal "/dev/tty")
  (literal "/dev/dtracehelper"))
(allow file-read* file-write* file-ioctl
  (literal "/dev/ptmx")
  (regex #"^/dev/ttys[0-9]+$"))
`

// SeatbeltProfile returns the Seatbelt profile (the language sandbox-exec
// reads) that confines an environment's commands as s says. Paths are
// written as quoted strings with their quotes and backslashes escaped; a
// path with a control character is refused rather than written, as is a
// relative one. The rules come in an order in which each later one
// overrides the earlier ones that match: the base, then the writable
// paths, then the network, then the hidden paths, so that nothing opens a
// hidden path again.
func SeatbeltProfile(s SeatbeltSpec) (string, error) {
	var b strings.Builder
	if s.Mode == None {
		// Mode None confines nothing but, with NetworkNone, the network.
		b.WriteString("(version 1)\n(allow default)\n(deny network*)\n")
	} else {
		b.WriteString(seatbeltBase)
		if len(s.Writable) > 0 {
			b.WriteString("(allow file-write* file-ioctl\n")
			for _, w := range sortedUnique(s.Writable) {
				q, err := seatbeltString(w)
				if err != nil {
					return "", err
				}
				fmt.Fprintf(&b, "  (subpath %s)\n", q)
			}
			b.WriteString(")\n")
		}
	}
	switch s.Network {
	case NetworkNone:
		if s.Mode == None {
			break // denied above
		}
		// Denied by default: no rule opens any address.
	case NetworkProxy:
		if s.ProxyPort <= 0 || s.ProxyPort > 65535 {
			return "", fmt.Errorf("seatbelt profile: the egress proxy's port %d is not a port", s.ProxyPort)
		}
		if s.Mode == None {
			return "", fmt.Errorf("seatbelt profile: network proxy needs a confined mode")
		}
		fmt.Fprintf(&b, "(allow network-outbound (remote ip \"localhost:%d\"))\n", s.ProxyPort)
	case NetworkHost:
		if s.Mode != None {
			return "", fmt.Errorf("seatbelt profile: sandbox mode %s cannot share the host's network", s.Mode)
		}
		return "", fmt.Errorf("seatbelt profile: mode none with the host's network needs no profile")
	default:
		return "", fmt.Errorf("seatbelt profile: invalid network access %d", int(s.Network))
	}
	if len(s.Hidden) > 0 {
		b.WriteString("(deny file-read* file-write*\n")
		for _, h := range sortedUnique(s.Hidden) {
			q, err := seatbeltString(h)
			if err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "  (subpath %s)\n", q)
		}
		b.WriteString(")\n")
	}
	return b.String(), nil
}

// seatbeltString quotes an absolute path as a string of the profile
// language: backslashes and double quotes escaped. Control characters are
// refused, since the language's escapes for them are not documented.
func seatbeltString(path string) (string, error) {
	if !strings.HasPrefix(path, "/") {
		return "", fmt.Errorf("seatbelt profile: path %q is not absolute", path)
	}
	for _, r := range path {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("seatbelt profile: path %q holds a control character", path)
		}
	}
	r := strings.NewReplacer(`\`, `\\`, `"`, `\"`)
	return `"` + r.Replace(path) + `"`, nil
}

// sortedUnique returns the paths sorted and without repeats, so that the
// same policy always gives the same profile.
func sortedUnique(paths []string) []string {
	out := slices.Clone(paths)
	slices.Sort(out)
	return slices.Compact(out)
}
