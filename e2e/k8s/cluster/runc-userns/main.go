// Command runc-userns is the runc that the test cluster's containerd
// starts: it runs the real runc (beside it) with the same arguments, and
// for a container in a user namespace (a pod with hostUsers: false) on a
// host whose resource controllers are in cgroup v1 hierarchies, it also
// delegates the container's own cgroup directories to the container's
// root: before `runc create` the cgroup mount of the bundle's spec is
// made writable, and once the container exists its directory in each v1
// hierarchy is given to the host uid and gid that the container's root
// maps to.
//
// That is what the environment service needs to bound each environment's
// processes and memory from inside a pod (services/environment/sandbox
// creates one child cgroup per environment). Only the directories change
// owner, not the files in them, so the pod can create child cgroups, which
// the kernel keeps within the container's own limits (v1 hierarchies are
// hierarchical), but cannot raise the limits the kubelet set. On cgroup v2
// containerd's cgroup_writable option does this instead, and this wrapper
// changes nothing; nor for containers that share the host's users.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	self, err := os.Executable()
	if err != nil {
		fail(err)
	}
	real := filepath.Join(filepath.Dir(self), "runc")
	args := os.Args[1:]
	bundle, pidFile, creating := createArgs(args)
	var hostUID, hostGID int = -1, -1
	if creating && cgroupV1() {
		hostUID, hostGID, err = writableCgroups(filepath.Join(bundle, "config.json"))
		if err != nil {
			fail(err)
		}
	}
	status := run(real, args)
	if status == 0 && hostUID >= 0 && pidFile != "" {
		if err := delegate(pidFile, hostUID, hostGID); err != nil {
			fmt.Fprintf(os.Stderr, "runc-userns: %v\n", err)
			status = 1
		}
	}
	os.Exit(status)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "runc-userns: %v\n", err)
	os.Exit(1)
}

// createArgs finds, in runc's command line, whether it creates (or runs)
// a container, and its bundle and pid file. Global options come before
// the subcommand; the bundle defaults to the working directory.
func createArgs(args []string) (bundle, pidFile string, creating bool) {
	i := 0
	for ; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			break
		}
		if !strings.Contains(a, "=") && slices.Contains([]string{"--root", "--log", "--log-format", "--criu", "--rootless"}, a) {
			i++
		}
	}
	if i >= len(args) || (args[i] != "create" && args[i] != "run") {
		return "", "", false
	}
	bundle = "."
	for j := i + 1; j < len(args); j++ {
		name, value, inline := strings.Cut(args[j], "=")
		if !inline && j+1 < len(args) {
			value = args[j+1]
		}
		switch strings.TrimLeft(name, "-") {
		case "bundle", "b":
			bundle = value
		case "pid-file":
			pidFile = value
		}
	}
	return bundle, pidFile, true
}

// cgroupV1 reports whether the memory controller is in a v1 hierarchy.
func cgroupV1() bool {
	_, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes")
	return err == nil
}

// writableCgroups makes the cgroup mount of a user-namespaced bundle
// writable and returns the host uid and gid of the container's root, or
// -1 when the container shares the host's users.
func writableCgroups(config string) (uid, gid int, err error) {
	b, err := os.ReadFile(config)
	if err != nil {
		return -1, -1, err
	}
	var spec map[string]any
	if err := json.Unmarshal(b, &spec); err != nil {
		return -1, -1, fmt.Errorf("%s: %w", config, err)
	}
	linux, _ := spec["linux"].(map[string]any)
	uid, gid = rootOf(linux["uidMappings"]), rootOf(linux["gidMappings"])
	if uid < 0 || gid < 0 {
		return -1, -1, nil
	}
	mounts, _ := spec["mounts"].([]any)
	for _, m := range mounts {
		m, _ := m.(map[string]any)
		if m["type"] != "cgroup" {
			continue
		}
		opts, _ := m["options"].([]any)
		m["options"] = slices.DeleteFunc(opts, func(o any) bool { return o == "ro" })
	}
	out, err := json.Marshal(spec)
	if err != nil {
		return -1, -1, err
	}
	return uid, gid, os.WriteFile(config, out, 0o600)
}

// rootOf returns the host id that id 0 maps to, or -1.
func rootOf(mappings any) int {
	list, _ := mappings.([]any)
	for _, m := range list {
		m, _ := m.(map[string]any)
		c, _ := m["containerID"].(float64)
		h, ok := m["hostID"].(float64)
		if ok && c == 0 {
			return int(h)
		}
	}
	return -1
}

// run runs the real runc with every descriptor this process inherited
// (the shim may pass more than the standard three; the Go runtime's own
// are close-on-exec), and returns its exit status.
func run(path string, args []string) int {
	entries, _ := os.ReadDir("/proc/self/fd")
	n := 3
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd+1 > n {
			n = fd + 1
		}
	}
	files := make([]uintptr, n)
	for fd := range files {
		files[fd] = uintptr(fd)
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno != 0 || flags&syscall.FD_CLOEXEC != 0 {
			files[fd] = ^uintptr(0) // closed in the child
		}
	}
	pid, err := syscall.ForkExec(path, append([]string{path}, args...), &syscall.ProcAttr{Env: os.Environ(), Files: files})
	if err != nil {
		fail(err)
	}
	var ws syscall.WaitStatus
	for {
		_, err = syscall.Wait4(pid, &ws, 0, nil)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		fail(err)
	}
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

// delegate gives the container's directory in each cgroup v1 hierarchy
// to uid and gid.
func delegate(pidFile string, uid, gid int) error {
	b, err := os.ReadFile(pidFile)
	if err != nil {
		return err
	}
	pid := strings.TrimSpace(string(b))
	mounts, err := v1Mounts()
	if err != nil {
		return err
	}
	f, err := os.Open("/proc/" + pid + "/cgroup")
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		point, ok := mounts[parts[1]]
		if !ok {
			continue
		}
		dir := filepath.Join(point, parts[2])
		if err := os.Chown(dir, uid, gid); err != nil {
			return fmt.Errorf("delegating %s: %w", dir, err)
		}
	}
	return sc.Err()
}

// v1Mounts maps each v1 hierarchy's controller list, as /proc/PID/cgroup
// names it ("cpu,cpuacct", "name=systemd"), to its mount point.
func v1Mounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := slices.Index(fields, "-")
		if sep < 5 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" || fields[3] != "/" {
			continue
		}
		var ctrls []string
		for _, o := range strings.Split(fields[sep+3], ",") {
			switch o {
			case "rw", "ro", "relatime", "nosuid", "nodev", "noexec", "clone_children", "xattr", "noprefix", "cpuset_v2_mode":
			default:
				ctrls = append(ctrls, o)
			}
		}
		out[strings.Join(ctrls, ",")] = fields[4]
	}
	return out, sc.Err()
}
