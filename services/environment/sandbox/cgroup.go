//go:build linux

package sandbox

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupPrefix starts the name of every cgroup this package creates; the
// creating service's pid follows, so SweepCgroups can tell which creators
// are gone.
const cgroupPrefix = "penguin-"

// CgroupParent returns the cgroup v2 directory under which Apply creates one
// cgroup per command: the cgroup this process runs in. The error says why
// there is none (no cgroup v2 mount, or it is not writable here); commands
// are then tracked by process group and session only.
//
// The answer is worked out once per process and then reused: finding it
// reads /proc/self/cgroup and the whole of /proc/self/mountinfo, which
// costs about a quarter of a millisecond, and Apply needs it for every
// command. A process is not expected to change cgroups or cgroup mounts
// while it runs commands.
func CgroupParent() (string, error) { return cgroupParent() }

// cgroupParent memoizes findCgroupParent. It is written only by sync.Once,
// so it holds one immutable answer rather than mutable state.
var cgroupParent = sync.OnceValues(findCgroupParent)

// findCgroupParent does CgroupParent's work, uncached.
func findCgroupParent() (string, error) {
	if err := kernelAtLeast(5, 14); err != nil {
		return "", fmt.Errorf("per-command cgroups need clone3 CLONE_INTO_CGROUP and cgroup.kill: %w", err)
	}
	own, err := ownCgroup()
	if err != nil {
		return "", err
	}
	mnt, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	rel := own
	if root != "/" {
		if !within(own, root) {
			return "", fmt.Errorf("this process's cgroup %s is outside the cgroup2 mount's root %s", own, root)
		}
		rel = strings.TrimPrefix(own, root)
	}
	dir := filepath.Join(mnt, rel)
	if err := unix.Access(dir, unix.W_OK); err != nil {
		return "", fmt.Errorf("cgroup %s is not writable: %w", dir, err)
	}
	return dir, nil
}

// ownCgroup returns this process's path in the cgroup v2 hierarchy, from
// the "0::" line of /proc/self/cgroup.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("reading own cgroup: %w", err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p, nil
		}
	}
	return "", errors.New("this process has no cgroup v2 membership")
}

// cgroup2Mount finds the mount point of the cgroup v2 hierarchy, and the
// hierarchy path mounted there.
func cgroup2Mount() (mountPoint, root string, err error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", "", fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source superoptions
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+1 >= len(fields) || fields[sep+1] != "cgroup2" {
			continue
		}
		return unescapeMount(fields[4]), unescapeMount(fields[3]), nil
	}
	if err := sc.Err(); err != nil {
		return "", "", fmt.Errorf("reading mounts: %w", err)
	}
	return "", "", errors.New("no cgroup2 file system is mounted")
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// cgroup is one command's cgroup: every process the command starts is
// born into it (clone3 with CLONE_INTO_CGROUP) and cannot leave it without
// write access to cgroup files, which Landlock-confined commands lack.
type cgroup struct {
	dir string
	fd  int // an open directory fd, handed to clone3
	// events is its cgroup.events, kept open: populated is asked before
	// and after every command, and one pread of an open file costs a
	// fifth of the system calls of reading it by name.
	events int
	// procsW is its cgroup.procs opened for writing, nil until a command
	// started by an environment's init is moved in (Env.Start); kept
	// open for the next command, as events is.
	procsW *os.File
	// killed is set once cgroup.kill was written. Such a cgroup is never
	// reused: on some kernels (6.18 here) a kill of an empty cgroup stays
	// armed and kills every process later cloned into it.
	killed atomic.Bool
}

// newCgroup creates a fresh cgroup under parent.
func newCgroup(parent string) (*cgroup, error) {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return nil, fmt.Errorf("naming a cgroup: %w", err)
	}
	dir := filepath.Join(parent, cgroupPrefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(r[:]))
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("opening cgroup %s: %w", dir, err)
	}
	events, err := unix.Openat(fd, "cgroup.events", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		_ = unix.Close(fd)
		_ = unix.Rmdir(dir)
		return nil, fmt.Errorf("opening cgroup %s: %w", dir, err)
	}
	return &cgroup{dir: dir, fd: fd, events: events}, nil
}

// procsFD returns the cgroup's cgroup.procs, open for writing.
func (c *cgroup) procsFD() (int, error) {
	if c.procsW == nil {
		fd, err := unix.Openat(c.fd, "cgroup.procs", unix.O_WRONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			return -1, fmt.Errorf("opening cgroup %s: %w", c.dir, err)
		}
		c.procsW = os.NewFile(uintptr(fd), c.dir+"/cgroup.procs")
	}
	return int(c.procsW.Fd()), nil
}

// kill ends every process in the cgroup. cgroup.kill (Linux 5.14) does it
// atomically, forks in flight included; on older kernels the members are
// killed one by one until none is left.
func (c *cgroup) kill() error {
	c.killed.Store(true)
	err := os.WriteFile(filepath.Join(c.dir, "cgroup.kill"), []byte("1"), 0)
	if err == nil {
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("killing cgroup %s: %w", c.dir, err)
	}
	for range 100 {
		pids, err := c.procs()
		if err != nil {
			return err
		}
		if len(pids) == 0 {
			return nil
		}
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
	}
	return fmt.Errorf("killing cgroup %s: members keep appearing", c.dir)
}

// procs lists the pids in the cgroup.
func (c *cgroup) procs() ([]int, error) {
	b, err := os.ReadFile(filepath.Join(c.dir, "cgroup.procs"))
	if err != nil {
		return nil, fmt.Errorf("reading cgroup %s: %w", c.dir, err)
	}
	var pids []int
	for f := range bytes.FieldsSeq(b) {
		if p, err := strconv.Atoi(string(f)); err == nil {
			pids = append(pids, p)
		}
	}
	return pids, nil
}

// populated reports whether any live process remains in the cgroup. A
// read from the start of cgroup.events shows its state now.
func (c *cgroup) populated() (bool, error) {
	var buf [128]byte
	n, err := unix.Pread(c.events, buf[:], 0)
	if err != nil {
		return false, fmt.Errorf("reading cgroup %s: %w", c.dir, err)
	}
	return parsePopulated(c.dir, buf[:max(n, 0)])
}

func cgroupPopulated(dir string) (bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return false, fmt.Errorf("reading cgroup %s: %w", dir, err)
	}
	return parsePopulated(dir, b)
}

// parsePopulated reads the populated line of cgroup.events.
func parsePopulated(dir string, events []byte) (bool, error) {
	for line := range bytes.SplitSeq(events, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("populated ")); ok {
			return string(v) != "0", nil
		}
	}
	return false, fmt.Errorf("cgroup %s: no populated line in cgroup.events", dir)
}

// remove kills whatever is left, waits (bounded) for the cgroup to empty,
// and removes it.
func (c *cgroup) remove() error {
	defer unix.Close(c.fd)
	defer unix.Close(c.events)
	if c.procsW != nil {
		defer c.procsW.Close()
	}
	return removeCgroup(c.dir, c.kill)
}

func removeCgroup(dir string, kill func() error) error {
	if pop, err := cgroupPopulated(dir); err == nil && pop {
		if err := kill(); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		err := poll(ctx, func() (bool, string) {
			pop, err := cgroupPopulated(dir)
			return err != nil || !pop, "processes of cgroup " + dir
		})
		if err != nil {
			return err
		}
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("removing cgroup %s: %w", dir, err)
	}
	return nil
}

// SweepCgroups removes the cgroups left behind by environment services
// that died without cleaning up (a crash, SIGKILL), killing what still runs
// in them: per-command cgroups, and environments' cgroups in the cgroup v2
// and v1 hierarchies. Parent-death signals only reach a command's first
// process and an environment's init; this catches the rest. Call it once
// at service start. It returns how many cgroups it removed.
func SweepCgroups() (int, error) {
	removed := 0
	var errs []error
	if parent, err := CgroupParent(); err == nil {
		n, err := sweepDir(parent, removeCgroupTree)
		removed += n
		errs = append(errs, err)
	}
	if hier, err := v1Hierarchies(); err == nil {
		seen := map[string]bool{}
		for _, dir := range hier {
			if seen[dir] {
				continue
			}
			seen[dir] = true
			n, err := sweepDir(dir, removeV1Cgroup)
			removed += n
			errs = append(errs, err)
		}
	}
	return removed, errors.Join(errs...)
}

// sweepDir removes, with remove, the cgroups under parent that a penguin
// process which no longer runs created.
func sweepDir(parent string, remove func(dir string) error) (int, error) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return 0, fmt.Errorf("listing cgroups in %s: %w", parent, err)
	}
	removed := 0
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), cgroupPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		owner, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(owner)
		if !ok || err != nil || pid == os.Getpid() {
			continue
		}
		if err := unix.Kill(pid, 0); !errors.Is(err, unix.ESRCH) {
			continue // its creator still runs
		}
		if err := remove(filepath.Join(parent, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	return removed, errors.Join(errs...)
}

// removeCgroupTree kills everything in a cgroup v2 directory and its
// descendants (an environment's cgroup holds its commands' cgroups), and
// removes them, deepest first.
func removeCgroupTree(dir string) error {
	kill := func() error { return (&cgroup{dir: dir}).kill() }
	if pop, err := cgroupPopulated(dir); err == nil && pop {
		if err := kill(); err != nil {
			return err
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("listing cgroup %s: %w", dir, err)
	}
	var errs []error
	for _, e := range entries {
		if e.IsDir() {
			errs = append(errs, removeCgroupTree(filepath.Join(dir, e.Name())))
		}
	}
	errs = append(errs, removeCgroup(dir, kill))
	return errors.Join(errs...)
}

// kernelAtLeast reports an error unless the running kernel's release is at
// least major.minor.
func kernelAtLeast(major, minor int) error {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return fmt.Errorf("uname: %w", err)
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var ma, mi int
	if _, err := fmt.Sscanf(rel, "%d.%d", &ma, &mi); err != nil {
		return fmt.Errorf("unrecognised kernel release %q", rel)
	}
	if ma < major || (ma == major && mi < minor) {
		return fmt.Errorf("kernel %s is older than %d.%d", rel, major, minor)
	}
	return nil
}
