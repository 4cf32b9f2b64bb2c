package sandbox

import (
	"errors"
	"os/exec"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

// newGroup starts cmd in a new process group, so that a console control
// event can reach it and its children alone.
func newGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.CreationFlags |= windows.CREATE_NEW_PROCESS_GROUP
}

// tree returns pid and its descendants alive now, found through their
// parent process ids. Windows keeps no process group a child cannot
// leave, and a process whose parent exited is found no more.
func tree(pid int) []uint32 {
	snap, err := windows.CreateToolhelp32Snapshot(windows.TH32CS_SNAPPROCESS, 0)
	if err != nil {
		return []uint32{uint32(pid)}
	}
	defer windows.CloseHandle(snap)
	children := map[uint32][]uint32{}
	var e windows.ProcessEntry32
	e.Size = uint32(unsafe.Sizeof(e))
	for err = windows.Process32First(snap, &e); err == nil; err = windows.Process32Next(snap, &e) {
		if e.ProcessID != e.ParentProcessID {
			children[e.ParentProcessID] = append(children[e.ParentProcessID], e.ProcessID)
		}
	}
	out := []uint32{uint32(pid)}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// KillGroup terminates the process pid and its descendants.
func KillGroup(pid int) error {
	if pid <= 0 {
		return nil
	}
	var errs []error
	for _, p := range tree(pid) {
		h, err := windows.OpenProcess(windows.PROCESS_TERMINATE, false, p)
		if err != nil {
			continue // gone already, or not ours
		}
		if err := windows.TerminateProcess(h, 1); err != nil && !errors.Is(err, windows.ERROR_ACCESS_DENIED) {
			errs = append(errs, err)
		}
		_ = windows.CloseHandle(h)
	}
	return errors.Join(errs...)
}

// GroupAlive reports whether the process pid or a descendant still runs.
func GroupAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	for _, p := range tree(pid) {
		h, err := windows.OpenProcess(windows.SYNCHRONIZE|windows.PROCESS_QUERY_LIMITED_INFORMATION, false, p)
		if err != nil {
			continue
		}
		ev, _ := windows.WaitForSingleObject(h, 0)
		_ = windows.CloseHandle(h)
		if ev == uint32(windows.WAIT_TIMEOUT) {
			return true
		}
	}
	return false
}
