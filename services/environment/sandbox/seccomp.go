//go:build linux

package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// deny makes a refused system call fail with EPERM, as a missing
// privilege would. (SECCOMP_RET_ERRNO without an errno would return 0,
// which looks like success.)
const deny = seccomp.ActionErrno | seccomp.Action(unix.EPERM)

// noSys makes a system call look absent, so that callers fall back: libc
// and Go retry clone3 as clone, whose flags the filter can read.
const noSys = seccomp.ActionErrno | seccomp.Action(unix.ENOSYS)

// Bits of arguments the filter tests.
const (
	cloneNewUser = unix.CLONE_NEWUSER
	// modeDevice is the bit that S_IFCHR and S_IFBLK set and no other
	// file type does (S_IFIFO, S_IFSOCK, S_IFREG, S_IFDIR lack it), so
	// mknod of a fifo stays allowed.
	modeDevice  = unix.S_IFCHR
	ptraceSeize = 0x4206
)

// commandPolicy is the system call filter of confined commands: what an
// agent's command never needs, and what would let it reach beyond its
// sandbox or attack the kernel, is refused with EPERM; everything else is
// allowed. It complements the other layers rather than replacing them:
// most of these calls already fail without capabilities, and the filter
// keeps them failing should a capability ever be left over.
func commandPolicy() seccomp.Policy {
	return seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls: []seccomp.SyscallGroup{
			{
				Action: deny,
				Names: []string{
					// File systems and mounts: the mount namespace is
					// the environment's, and stays as its init made it.
					"mount", "umount2", "pivot_root", "chroot", "swapon", "swapoff",
					"open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
					"open_by_handle_at", "quotactl", "quotactl_fd",
					// The kernel itself: modules, kexec, reboot, clocks,
					// accounting, its log, raw I/O ports.
					"init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load", "reboot",
					"settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "acct", "syslog",
					"iopl", "ioperm", "lookup_dcookie", "uselib", "vhangup",
					// Kernel attack surface an agent's command has no use
					// for: eBPF, perf events, the keyring, userfaultfd,
					// io_uring (whose operations bypass this filter).
					"bpf", "perf_event_open", "keyctl", "add_key", "request_key", "userfaultfd",
					"io_uring_setup", "io_uring_enter", "io_uring_register", "fanotify_init",
					// Other processes' memory and files, and joining
					// namespaces.
					"process_vm_readv", "process_vm_writev", "pidfd_getfd", "setns",
				},
				NamesWithCondtions: []seccomp.NameWithConditions{
					// New user namespaces would hand a command
					// capabilities over namespaces of its own.
					{Name: "unshare", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNewUser}}},
					{Name: "clone", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.BitsSet, Value: cloneNewUser}}},
					// Device nodes (character and block); fifos stay.
					{Name: "mknod", Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.BitsSet, Value: modeDevice}}},
					{Name: "mknodat", Conditions: seccomp.ArgumentConditions{{Argument: 2, Operation: seccomp.BitsSet, Value: modeDevice}}},
					// Tracing a process the command did not start:
					// PTRACE_ATTACH and PTRACE_SEIZE. A debugger that
					// starts its program (PTRACE_TRACEME) still works.
					{Name: "ptrace", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: unix.PTRACE_ATTACH}}},
					{Name: "ptrace", Conditions: seccomp.ArgumentConditions{{Argument: 0, Operation: seccomp.Equal, Value: ptraceSeize}}},
					// Typing into a terminal's input queue (TIOCSTI).
					{Name: "ioctl", Conditions: seccomp.ArgumentConditions{{Argument: 1, Operation: seccomp.Equal, Value: unix.TIOCSTI}}},
				},
			},
			{
				// clone3 passes its flags in memory, out of the filter's
				// sight: it reports "not implemented", and callers use
				// clone, whose flags are checked above.
				Action: noSys,
				Names:  []string{"clone3"},
			},
		},
	}
}

// loadCommandFilter installs the filter on the calling thread (which the
// command is forked from and inherits it), after no_new_privs. It also
// refuses every system call made through another architecture's entry
// point (the 32-bit int 0x80 on x86-64), which the library's filter lets
// through for lack of a policy for that architecture; that part is four
// BPF instructions written here.
func loadCommandFilter() error {
	if err := seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Policy: commandPolicy()}); err != nil {
		return err
	}
	return loadNativeOnly()
}

// nativeArch is the AUDIT_ARCH value of this build's architecture.
func nativeArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	default:
		return 0, fmt.Errorf("no seccomp architecture known for %s", runtime.GOARCH)
	}
}

// loadNativeOnly installs a filter that answers ENOSYS to every system
// call of a foreign architecture.
func loadNativeOnly() error {
	native, err := nativeArch()
	if err != nil {
		return err
	}
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: native, SkipTrue: 1},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)},
		bpf.RetConstant{Val: unix.SECCOMP_RET_ALLOW},
	})
	if err != nil {
		return err
	}
	filter := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		filter[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fprog)), 0, 0); err != nil {
		return fmt.Errorf("installing the architecture filter: %w", err)
	}
	return nil
}
