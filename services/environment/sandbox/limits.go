//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// limitControllers are the cgroup controllers the limits need: pids and
// memory must exist; cpu is used where present.
var limitControllers = []string{"pids", "memory", "cpu"}

// envCgroups are the cgroups that hold one environment's limits: a
// directory in the cgroup v2 hierarchy when it offers the controllers,
// else one directory per cgroup v1 hierarchy. Every process of the
// environment is in them: the init, which the environment's daemons are
// reparented to, and every command, which joins before it runs.
type envCgroups struct {
	// v2 is the environment's cgroup v2 directory, or "".
	v2 string
	// v1 are the environment's directories in the v1 hierarchies, by
	// controller ("pids", "memory", "cpu"); several controllers may share
	// one directory.
	v1 map[string]string
	// oomKills and pidsRefused are the files that count the limits' hits
	// (nil where absent), kept open: each command reads them before and
	// after it runs, and opening a cgroup file costs some 25 µs where
	// reading an open one costs 1.
	oomKills, pidsRefused *os.File
}

// procsFiles are the cgroup.procs files a process writes "0" to, to join
// the environment's v1 cgroups (v2 membership comes with CLONE_INTO_CGROUP).
func (c *envCgroups) procsFiles() []string {
	var out []string
	for _, d := range c.v1 {
		f := filepath.Join(d, "cgroup.procs")
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	slices.Sort(out)
	return out
}

// newEnvCgroups creates the cgroups of one environment under this
// process's own cgroups and writes the limits into them. It fails, with
// an error wrapping ErrUnsupported, when the host offers neither a v2
// hierarchy with the pids and memory controllers nor v1 hierarchies with
// them.
func newEnvCgroups(l Limits) (*envCgroups, error) {
	l = l.withDefaults()
	name, err := envCgroupName()
	if err != nil {
		return nil, err
	}
	if parent, err := v2LimitParent(); err == nil {
		return newV2EnvCgroup(parent, name, l)
	} else if v1, v1Err := v1Hierarchies(); v1Err == nil {
		return newV1EnvCgroups(v1, name, l)
	} else {
		return nil, fmt.Errorf("%w: resource limits need the pids and memory cgroup controllers, in the cgroup v2 hierarchy (%v) or in v1 hierarchies (%v)", ErrUnsupported, err, v1Err)
	}
}

// envCgroupName names an environment's cgroups: the prefix and creator
// pid that SweepCgroups reads, "env", and a random part.
func envCgroupName() (string, error) {
	var r [6]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("naming a cgroup: %w", err)
	}
	return cgroupPrefix + strconv.Itoa(os.Getpid()) + "-env-" + hex.EncodeToString(r[:]), nil
}

// newV1EnvCgroups creates the environment's directory in each v1
// hierarchy and writes its limit there.
func newV1EnvCgroups(hier map[string]string, name string, l Limits) (*envCgroups, error) {
	c := &envCgroups{v1: map[string]string{}}
	for ctrl, base := range hier {
		dir := filepath.Join(base, name)
		if _, made := c.dirSet()[dir]; !made {
			if err := unix.Mkdir(dir, 0o755); err != nil {
				c.remove()
				return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
			}
		}
		c.v1[ctrl] = dir
	}
	writes := []struct{ ctrl, file, value string }{
		{"pids", "pids.max", limitValue(l.Pids)},
		{"memory", "memory.limit_in_bytes", strconv.FormatInt(max(l.Memory, -1), 10)},
		// With swap accounting, the memory and swap limit is set to the
		// same value, so that swap is no way around the memory limit.
		{"memory", "memory.memsw.limit_in_bytes", strconv.FormatInt(max(l.Memory, -1), 10)},
		{"cpu", "cpu.shares", strconv.FormatInt(l.CPUWeight*1024/100, 10)},
	}
	for _, w := range writes {
		dir, ok := c.v1[w.ctrl]
		if !ok {
			continue
		}
		f := filepath.Join(dir, w.file)
		if err := os.WriteFile(f, []byte(w.value), 0); err != nil {
			if w.file == "memory.memsw.limit_in_bytes" && errors.Is(err, os.ErrNotExist) {
				continue // no swap accounting: the memory limit alone holds
			}
			c.remove()
			return nil, fmt.Errorf("setting %s to %s: %w", f, w.value, err)
		}
	}
	c.openCounters()
	return c, nil
}

// dirSet is the set of v1 directories already created.
func (c *envCgroups) dirSet() map[string]bool {
	s := map[string]bool{}
	for _, d := range c.v1 {
		s[d] = true
	}
	return s
}

// limitValue spells a count for pids.max and memory.max: "max" for none.
func limitValue(n int64) string {
	if n < 0 {
		return "max"
	}
	return strconv.FormatInt(n, 10)
}

// newV2EnvCgroup creates the environment's cgroup under parent, whose
// subtree_control enables the limit controllers, and writes the limits.
func newV2EnvCgroup(parent, name string, l Limits) (*envCgroups, error) {
	dir := filepath.Join(parent, name)
	if err := unix.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("creating cgroup %s: %w", dir, err)
	}
	c := &envCgroups{v2: dir}
	writes := []struct{ file, value string }{
		{"pids.max", limitValue(l.Pids)},
		{"memory.max", limitValue(l.Memory)},
		{"memory.swap.max", "0"},
		{"cpu.weight", strconv.FormatInt(l.CPUWeight, 10)},
	}
	for _, w := range writes {
		f := filepath.Join(dir, w.file)
		if err := os.WriteFile(f, []byte(w.value), 0); err != nil {
			if errors.Is(err, os.ErrNotExist) && (w.file == "memory.swap.max" || w.file == "cpu.weight") {
				continue // no swap, or no cpu controller: the rest holds
			}
			c.remove()
			return nil, fmt.Errorf("setting %s to %s: %w", f, w.value, err)
		}
	}
	c.openCounters()
	return c, nil
}

// openCounters opens the files events reads: memory.events and
// pids.events in v2; memory.oom_control and pids.events in v1. A file
// that cannot be opened counts nothing.
func (c *envCgroups) openCounters() {
	open := func(dir, file string) *os.File {
		if dir == "" {
			return nil
		}
		f, _ := os.Open(filepath.Join(dir, file))
		return f
	}
	if c.v2 != "" {
		c.oomKills, c.pidsRefused = open(c.v2, "memory.events"), open(c.v2, "pids.events")
		return
	}
	c.oomKills, c.pidsRefused = open(c.v1["memory"], "memory.oom_control"), open(c.v1["pids"], "pids.events")
}

// events reads how often the limits were hit.
func (c *envCgroups) events() LimitEvents {
	return LimitEvents{OOMKills: keyedValue(c.oomKills, "oom_kill"), PidsRefused: keyedValue(c.pidsRefused, "max")}
}

// keyedValue reads the "key value" lines of f, a cgroup file open for
// reading, and returns key's value, or 0.
func keyedValue(f *os.File, key string) int64 {
	if f == nil {
		return 0
	}
	var buf [4096]byte
	n, err := f.ReadAt(buf[:], 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0
	}
	for line := range strings.SplitSeq(string(buf[:n]), "\n") {
		if v, ok := strings.CutPrefix(line, key+" "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// remove kills what is left in the environment's cgroups and removes
// them.
func (c *envCgroups) remove() error {
	var errs []error
	for _, f := range []*os.File{c.oomKills, c.pidsRefused} {
		if f != nil {
			f.Close()
		}
	}
	if c.v2 != "" {
		pool.drain(c.v2)
		errs = append(errs, removeCgroupTree(c.v2))
	}
	for dir := range c.dirSet() {
		errs = append(errs, removeV1Cgroup(dir))
	}
	return errors.Join(errs...)
}

// removeV1Cgroup kills the members of a v1 cgroup (v1 has no
// cgroup.kill) until none is left, and removes it once the kernel lets go
// of it (a killed task leaves its cgroups when it is reaped).
func removeV1Cgroup(dir string) error {
	c := &cgroup{dir: dir}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var rmErr error
	err := poll(ctx, func() (bool, string) {
		pids, err := c.procs()
		if errors.Is(err, os.ErrNotExist) {
			rmErr = nil
			return true, ""
		}
		for _, p := range pids {
			_ = unix.Kill(p, unix.SIGKILL)
		}
		if len(pids) > 0 {
			return false, fmt.Sprintf("processes %v of cgroup %s", pids, dir)
		}
		rmErr = unix.Rmdir(dir)
		if rmErr == nil || errors.Is(rmErr, unix.ENOENT) {
			rmErr = nil
			return true, ""
		}
		return !errors.Is(rmErr, unix.EBUSY), "cgroup " + dir
	})
	if err != nil {
		return err
	}
	if rmErr != nil {
		return fmt.Errorf("removing cgroup %s: %w", dir, rmErr)
	}
	return nil
}

// v1Hierarchies finds, for each limit controller, this process's
// directory in the cgroup v1 hierarchy that carries it. pids and memory
// are required; cpu is optional.
func v1Hierarchies() (map[string]string, error) {
	own, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, fmt.Errorf("reading own cgroups: %w", err)
	}
	paths := map[string]string{} // controller -> path in its hierarchy
	for line := range strings.SplitSeq(string(own), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 || f[1] == "" {
			continue
		}
		for ctrl := range strings.SplitSeq(f[1], ",") {
			paths[ctrl] = f[2]
		}
	}
	mounts, err := v1Mounts()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, ctrl := range limitControllers {
		path, ok := paths[ctrl]
		m, mounted := mounts[ctrl]
		if !ok || !mounted {
			if ctrl == "cpu" {
				continue
			}
			return nil, fmt.Errorf("no cgroup v1 hierarchy with the %s controller", ctrl)
		}
		rel := path
		if m.root != "/" {
			if !within(path, m.root) {
				return nil, fmt.Errorf("this process's %s cgroup %s is outside the mount's root %s", ctrl, path, m.root)
			}
			rel = strings.TrimPrefix(path, m.root)
		}
		dir := filepath.Join(m.point, rel)
		if err := unix.Access(dir, unix.W_OK); err != nil {
			if ctrl == "cpu" {
				continue
			}
			return nil, fmt.Errorf("cgroup %s is not writable: %w", dir, err)
		}
		out[ctrl] = dir
	}
	return out, nil
}

// v1Mount is where one cgroup v1 hierarchy is mounted.
type v1Mount struct{ point, root string }

// v1Mounts finds the mounts of the cgroup v1 hierarchies, by controller.
func v1Mounts() (map[string]v1Mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("reading mounts: %w", err)
	}
	defer f.Close()
	out := map[string]v1Mount{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		for opt := range strings.SplitSeq(fields[sep+3], ",") {
			if slices.Contains(limitControllers, opt) {
				if _, seen := out[opt]; !seen {
					out[opt] = v1Mount{point: unescapeMount(fields[4]), root: unescapeMount(fields[3])}
				}
			}
		}
	}
	return out, sc.Err()
}

// v2LimitParent returns the cgroup v2 directory under which environments'
// cgroups are created with the limit controllers enabled, delegating
// once: when this process's own cgroup offers pids and memory but does
// not enable them for its children, this process moves into a leaf of
// its own ("penguin-service") and enables them, as cgroup v2 allows
// controllers only in cgroups without processes of their own.
func v2LimitParent() (string, error) { return v2Delegated() }

var v2Delegated = sync.OnceValues(delegateV2)

func delegateV2() (string, error) {
	parent, err := CgroupParent()
	if err != nil {
		return "", err
	}
	avail, err := os.ReadFile(filepath.Join(parent, "cgroup.controllers"))
	if err != nil {
		return "", fmt.Errorf("reading the controllers of %s: %w", parent, err)
	}
	have := strings.Fields(string(avail))
	var enable []string
	for _, ctrl := range limitControllers {
		if slices.Contains(have, ctrl) {
			enable = append(enable, "+"+ctrl)
		} else if ctrl != "cpu" {
			return "", fmt.Errorf("the cgroup v2 hierarchy at %s does not offer the %s controller", parent, ctrl)
		}
	}
	control := filepath.Join(parent, "cgroup.subtree_control")
	err = os.WriteFile(control, []byte(strings.Join(enable, " ")), 0)
	if errors.Is(err, unix.EBUSY) {
		// This cgroup holds processes (this one): move into a leaf.
		leaf := filepath.Join(parent, cgroupPrefix+"service")
		if err := unix.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return "", fmt.Errorf("creating cgroup %s: %w", leaf, err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte("0"), 0); err != nil {
			return "", fmt.Errorf("moving into cgroup %s: %w", leaf, err)
		}
		err = os.WriteFile(control, []byte(strings.Join(enable, " ")), 0)
	}
	if err != nil {
		return "", fmt.Errorf("enabling %s in %s: %w", strings.Join(enable, " "), control, err)
	}
	return parent, nil
}
