//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"

	seccomp "github.com/elastic/go-seccomp-bpf"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
	"golang.org/x/sys/unix"
)

// MinLandlockABI is the lowest Landlock ABI version that can enforce
// WorkspaceWrite and ReadOnly. Version 3 (Linux 6.2) is the first that
// controls truncation; below it, truncate(2) and open(O_TRUNC) on any file
// outside the workspace would still succeed, so "writes only to the
// workspace" would be a lie.
const MinLandlockABI = 3

// Probe asks the host what it can enforce. Its fields are functions so that
// tests can simulate a host that lacks a feature; HostProbe returns the real
// one.
type Probe struct {
	// LandlockABI returns the Landlock ABI version the kernel offers, or
	// an error when Landlock is absent or disabled at boot.
	LandlockABI func() (int, error)
	// NewNetNS returns nil when this process can create a network
	// namespace and bring its loopback interface up.
	NewNetNS func() error
	// Privileged returns nil when this process may create namespaces and
	// run commands as another user (it is root).
	Privileged func() error
	// Limits returns nil when the host offers the cgroup controllers that
	// hold an environment's limits (pids and memory, in cgroup v2 or v1).
	Limits func() error
	// Seccomp returns nil when the kernel filters system calls.
	Seccomp func() error
}

// HostProbe returns the probe that asks the running kernel. Each answer
// is worked out once per process: none changes while it runs (the
// kernel's features, this process's user), and CreateEnvironment asks
// them all at every call.
func HostProbe() Probe {
	return Probe{
		LandlockABI: hostLandlockABI,
		NewNetNS:    hostNetNS,
		Privileged:  hostPrivileged,
		Limits:      hostLimits,
		Seccomp:     hostSeccomp,
	}
}

var (
	hostLandlockABI = sync.OnceValues(ll.LandlockGetABIVersion)
	hostNetNS       = sync.OnceValue(probeNetNS)
	hostPrivileged  = sync.OnceValue(privileged)
	hostLimits      = sync.OnceValue(probeLimits)
	hostSeccomp     = sync.OnceValue(seccompAvailable)
)

// privileged reports whether this process runs as root.
func privileged() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("the service runs as uid %d, not root", os.Geteuid())
	}
	return nil
}

// seccompAvailable reports whether the kernel has seccomp filters.
func seccompAvailable() error {
	if !seccomp.Supported() {
		return errors.New("the kernel has no seccomp filter support (CONFIG_SECCOMP_FILTER)")
	}
	return nil
}

// probeLimits finds the controllers without creating anything: a cgroup
// v2 hierarchy that offers pids and memory, or v1 hierarchies with them.
func probeLimits() error {
	v2Err := errors.New("no writable cgroup v2 hierarchy")
	if parent, err := CgroupParent(); err == nil {
		avail, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
		have := strings.Fields(string(avail))
		switch {
		case err != nil:
			v2Err = err
		case slices.Contains(have, "pids") && slices.Contains(have, "memory"):
			return nil
		default:
			v2Err = fmt.Errorf("the cgroup v2 hierarchy offers only %q", have)
		}
	}
	_, v1Err := v1Hierarchies()
	if v1Err == nil {
		return nil
	}
	return fmt.Errorf("%v; %v", v2Err, v1Err)
}

// Check reports whether this host can enforce p, with an error wrapping
// ErrUnsupported that names what is missing when it cannot. Mode None on
// the host's network always passes. The environment service calls it in
// CreateEnvironment so that a sandbox is refused up front rather than
// silently weakened.
func Check(p Policy) error { return HostProbe().Check(p) }

// Check is Check against this probe.
func (pr Probe) Check(p Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	if p.Mode != None {
		if err := pr.Privileged(); err != nil {
			return fmt.Errorf("%w: sandbox mode %s runs commands in namespaces of their own as another user, which needs the service to run as root: %v", ErrUnsupported, p.Mode, err)
		}
		abi, err := pr.LandlockABI()
		if err != nil {
			return fmt.Errorf("%w: sandbox mode %s needs Linux Landlock (CONFIG_SECURITY_LANDLOCK=y and \"landlock\" in the lsm= boot list), which this kernel does not provide: %v", ErrUnsupported, p.Mode, err)
		}
		if abi < MinLandlockABI {
			return fmt.Errorf("%w: sandbox mode %s needs Landlock ABI v%d (Linux 6.2 or later, for truncation control); this kernel offers v%d", ErrUnsupported, p.Mode, MinLandlockABI, abi)
		}
		if err := pr.Seccomp(); err != nil {
			return fmt.Errorf("%w: sandbox mode %s needs seccomp: %v", ErrUnsupported, p.Mode, err)
		}
		if err := pr.Limits(); err != nil {
			return fmt.Errorf("%w: sandbox mode %s bounds each environment's processes and memory, which needs the pids and memory cgroup controllers: %v", ErrUnsupported, p.Mode, err)
		}
	}
	if p.Network != NetworkHost {
		if err := pr.NewNetNS(); err != nil {
			return fmt.Errorf("%w: network access %s needs a new network namespace, which this process cannot create: %v", ErrUnsupported, p.Network, err)
		}
	}
	return nil
}

// probeNetNS moves one locked OS thread into a new network namespace,
// brings its loopback up (exactly what a no-network command needs), and
// moves the thread back. Should the way back fail, the thread stays locked
// so that the Go runtime discards it when the goroutine ends and no other
// goroutine ever runs in that namespace.
func probeNetNS() error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("opening the current network namespace: %w", err)
			return
		}
		defer unix.Close(orig)
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("unshare(CLONE_NEWNET): %w", err)
			return
		}
		upErr := loopbackUp()
		if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
			// Deliberately still locked: see above.
			done <- fmt.Errorf("returning to the original network namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		done <- upErr
	}()
	return <-done
}

// loopbackUp sets the IFF_UP flag on "lo" in the calling thread's network
// namespace. A new namespace starts with its loopback down, so without this
// even 127.0.0.1 inside the sandbox would be unreachable.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("socket for loopback setup: %w", err)
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return fmt.Errorf("loopback interface request: %w", err)
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("reading flags of lo: %w", err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		if errors.Is(err, unix.EPERM) {
			return fmt.Errorf("bringing lo up: %w (needs CAP_NET_ADMIN)", err)
		}
		return fmt.Errorf("bringing lo up: %w", err)
	}
	return nil
}
