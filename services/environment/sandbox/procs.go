//go:build linux

package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// proc is the part of /proc/<pid>/stat that process tracking needs.
type proc struct {
	pid, ppid, pgrp, sid int
	state                byte
}

// readProcs lists every process of the PID namespace from /proc. Processes
// that exit while the list is read are skipped.
func readProcs() ([]proc, error) {
	d, err := os.Open("/proc")
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil, fmt.Errorf("listing processes: %w", err)
	}
	procs := make([]proc, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		p, err := parseStat(b)
		if err != nil || p.pid != pid {
			continue
		}
		procs = append(procs, p)
	}
	return procs, nil
}

// parseStat parses "pid (comm) state ppid pgrp session ...". The command
// name may itself contain spaces and parentheses, so the fields after it
// are found from the last ')'.
func parseStat(b []byte) (proc, error) {
	open := bytes.IndexByte(b, '(')
	end := bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return proc{}, errors.New("malformed stat line")
	}
	pid, err := strconv.Atoi(string(bytes.TrimSpace(b[:open])))
	if err != nil {
		return proc{}, fmt.Errorf("malformed pid in stat line: %w", err)
	}
	f := bytes.Fields(b[end+1:])
	if len(f) < 4 || len(f[0]) != 1 {
		return proc{}, errors.New("malformed stat line")
	}
	p := proc{pid: pid, state: f[0][0]}
	for i, dst := range []*int{&p.ppid, &p.pgrp, &p.sid} {
		if *dst, err = strconv.Atoi(string(f[i+1])); err != nil {
			return proc{}, fmt.Errorf("malformed stat line: %w", err)
		}
	}
	return p, nil
}

// members returns the live processes that belong to leader: those in its
// process group or its session (a job-control shell moves background jobs
// into groups of their own, but they stay in the session), plus every
// descendant of one of those (a child that called setsid leaves both, but
// keeps its parent). Zombies are left out: they run nothing and hold no
// file open; only their parent can remove them.
func members(procs []proc, leader int) []proc {
	in := make(map[int]bool)
	children := make(map[int][]proc)
	var out []proc
	for _, p := range procs {
		if p.state == 'Z' || p.state == 'X' {
			continue
		}
		children[p.ppid] = append(children[p.ppid], p)
		if p.pid == leader || p.pgrp == leader || p.sid == leader {
			in[p.pid] = true
			out = append(out, p)
		}
	}
	for i := 0; i < len(out); i++ {
		for _, c := range children[out[i].pid] {
			if !in[c.pid] {
				in[c.pid] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// guardLeader refuses pids whose "group" would include this process or
// init: killing them would take the service or the machine down.
func guardLeader(pid int) error {
	if pid <= 1 {
		return fmt.Errorf("refusing to treat pid %d as a process group", pid)
	}
	if pid == os.Getpid() || pid == unix.Getpgrp() {
		return fmt.Errorf("refusing to kill pid %d: it is this process or its own group", pid)
	}
	if sid, err := unix.Getsid(0); err == nil && pid == sid {
		return fmt.Errorf("refusing to kill pid %d: it leads this process's session", pid)
	}
	return nil
}

// KillGroup sends SIGKILL to everything the command led by pid started: its
// process group, its session, and the descendants of any of those. Apply
// starts every command as a session leader, so pid is also the group and
// session id.
//
// It first freezes the set with SIGSTOP, re-reading /proc until no new
// member appears, so that no process can fork or reparent its children
// between the scan and the kill; then it kills them all. A process that
// both called setsid and lost its parent before KillGroup ran (the classic
// double-fork daemon) cannot be found this way: only a cgroup (see Group)
// catches it.
//
// Process ids are recycled once the whole group is gone (pid_max may be as
// low as 32768), so call KillGroup only for a group that has not been seen
// to end; Group does that bookkeeping.
func KillGroup(pid int) error {
	if err := guardLeader(pid); err != nil {
		return err
	}
	self := os.Getpid()
	stopped := make(map[int]bool)
	_ = unix.Kill(-pid, unix.SIGSTOP)
	var scanErr error
	for range 100 {
		procs, err := readProcs()
		if err != nil {
			scanErr = err
			break
		}
		grew := false
		for _, m := range members(procs, pid) {
			if m.pid == self || m.pid == 1 || stopped[m.pid] {
				continue
			}
			stopped[m.pid] = true
			grew = true
			_ = unix.Kill(m.pid, unix.SIGSTOP)
		}
		if !grew {
			break
		}
	}
	errGroup := unix.Kill(-pid, unix.SIGKILL)
	for p := range stopped {
		_ = unix.Kill(p, unix.SIGKILL)
	}
	if scanErr != nil {
		return fmt.Errorf("killed process group %d, but could not look for members outside it: %w", pid, scanErr)
	}
	if errGroup != nil && !errors.Is(errGroup, unix.ESRCH) && len(stopped) == 0 {
		return fmt.Errorf("killing process group %d: %w", pid, errGroup)
	}
	return nil
}

// GroupAlive reports whether any live (non-zombie) process still belongs to
// the command led by pgid, in the sense of KillGroup.
func GroupAlive(pgid int) bool {
	return len(groupPids(pgid)) > 0
}

// groupPids lists the live members of the command led by pgid.
func groupPids(pgid int) []int {
	procs, err := readProcs()
	if err != nil {
		// Without /proc, the group itself is all that can be asked about.
		if unix.Kill(-pgid, 0) == nil {
			return []int{pgid}
		}
		return nil
	}
	var pids []int
	for _, m := range members(procs, pgid) {
		pids = append(pids, m.pid)
	}
	slices.Sort(pids)
	return pids
}

// WaitGroupGone polls until no live process of the command led by pgid
// remains, or ctx ends; the error then lists the survivors.
func WaitGroupGone(ctx context.Context, pgid int) error {
	return poll(ctx, func() (bool, string) {
		pids := groupPids(pgid)
		return len(pids) == 0, fmt.Sprintf("processes %v of group %d", pids, pgid)
	})
}
