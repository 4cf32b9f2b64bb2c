//go:build linux

// Package netns gives an end-to-end test several "hosts" on one machine:
// Linux network namespaces, each with its own address on a private bridge,
// so that services which must reach each other over a network (engine
// replicas, environment replicas, the llm service) really do, and a host
// can die with everything it ran.
//
// A [Network] is one bridge in the root namespace with a /24 of the
// test-only range 10.231.0.0/16; the bridge holds the .1 address (the
// "gateway", which is the test process itself) and every [Host] gets one
// namespace, one veth pair and the next address from .10 up. Namespaces
// have no default route: a host reaches the other hosts and the gateway,
// nothing else. [Network.Forward] makes a service of the root namespace
// (PostgreSQL on 127.0.0.1, say) reachable from the hosts through a TCP
// forwarder on the gateway address.
//
// Everything is named "pgt" + the test process's pid (six hex digits) + two
// random hex digits, and removed when the test ends, even when it fails.
// A test process that crashed leaves its namespaces and links behind; the
// next [New] sweeps every "pgt" object whose pid is no longer alive.
//
// It needs root and iproute2; [New] skips the test when either is missing.
package netns

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// prefix starts the name of every object this package creates, so that a
// sweep can find the leftovers of a crashed run.
const prefix = "pgt"

// commandTimeout bounds every ip(8) invocation.
const commandTimeout = 10 * time.Second

// netnsEtc is where `ip netns exec` looks for files to bind-mount over
// /etc inside a namespace (hosts, resolv.conf).
const netnsEtc = "/etc/netns"

// Network is a private bridge and the hosts attached to it.
type Network struct {
	t      testing.TB
	id     string // pid and random suffix, shared by every name
	bridge string
	subnet netip.Prefix
	hosts  []*Host
}

// Host is one network namespace on a [Network].
type Host struct {
	// Name is the name the test gave the host ("engine-a").
	Name string
	// Namespace is the network namespace's name, for `ip netns`.
	Namespace string
	// IP is the host's address on the bridge.
	IP netip.Addr

	net *Network
}

// New creates a bridge with a free /24 of 10.231.0.0/16 and removes it,
// with every host added later, when t ends. It skips t when the process is
// not root or ip(8) is missing, and sweeps the leftovers of crashed runs
// first.
func New(t testing.TB) *Network {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("netns: network namespaces need root (ip netns add); run the test as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("netns: ip(8) from iproute2 is not installed")
	}
	if err := Sweep(); err != nil {
		t.Logf("netns: sweeping leftovers of earlier runs: %v", err)
	}
	var r [1]byte
	_, _ = rand.Read(r[:])
	n := &Network{t: t, id: fmt.Sprintf("%06x%02x", os.Getpid(), r[0])}
	n.bridge = prefix + n.id + "br"
	t.Cleanup(n.teardown)
	if err := ip("link", "add", n.bridge, "type", "bridge"); err != nil {
		t.Fatalf("netns: %v", err)
	}
	subnet, err := n.claimSubnet()
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	n.subnet = subnet
	if err := ip("link", "set", n.bridge, "up"); err != nil {
		t.Fatalf("netns: %v", err)
	}
	return n
}

// claimSubnet gives the bridge the .1 address of a /24 of 10.231.0.0/16
// that no interface of the root namespace uses.
func (n *Network) claimSubnet() (netip.Prefix, error) {
	for range 16 {
		used, err := usedSubnets()
		if err != nil {
			return netip.Prefix{}, err
		}
		var b [1]byte
		_, _ = rand.Read(b[:])
		third := 1 + int(b[0])%254
		if used[third] {
			continue
		}
		gw := netip.AddrFrom4([4]byte{10, 231, byte(third), 1})
		if err := ip("addr", "add", netip.PrefixFrom(gw, 24).String(), "dev", n.bridge); err != nil {
			return netip.Prefix{}, err
		}
		// Another run may have picked the same subnet at the same time;
		// the one that sees two users gives way and tries again.
		if owners, err := subnetOwners(third); err == nil && owners == 1 {
			return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 231, byte(third), 0}), 24), nil
		}
		if err := ip("addr", "del", netip.PrefixFrom(gw, 24).String(), "dev", n.bridge); err != nil {
			return netip.Prefix{}, err
		}
	}
	return netip.Prefix{}, errors.New("no free /24 in 10.231.0.0/16 after 16 tries")
}

// usedSubnets returns the third octets of the 10.231.x.y addresses of the
// root namespace.
func usedSubnets() (map[int]bool, error) {
	out, err := ipOutput("-o", "-4", "addr", "show")
	if err != nil {
		return nil, err
	}
	used := map[int]bool{}
	for _, f := range strings.Fields(out) {
		if a, ok := strings.CutPrefix(f, "10.231."); ok {
			third, _, _ := strings.Cut(a, ".")
			if v, err := strconv.Atoi(third); err == nil {
				used[v] = true
			}
		}
	}
	return used, nil
}

// subnetOwners counts the addresses in 10.231.third.0/24 of the root
// namespace.
func subnetOwners(third int) (int, error) {
	out, err := ipOutput("-o", "-4", "addr", "show")
	if err != nil {
		return 0, err
	}
	return strings.Count(out, fmt.Sprintf(" 10.231.%d.", third)), nil
}

// Gateway returns the root namespace's address on the bridge: the address
// at which hosts reach the test process.
func (n *Network) Gateway() netip.Addr {
	a := n.subnet.Addr().As4()
	a[3] = 1
	return netip.AddrFrom4(a)
}

// AddHost creates a namespace named after name, with loopback up and one
// interface (eth0) on the bridge at the next free address. Names must be
// unique on the network and short (letters, digits and dashes).
func (n *Network) AddHost(name string) *Host {
	n.t.Helper()
	if !validName(name) {
		n.t.Fatalf("netns: host name %q: use 1 to 20 letters, digits and dashes", name)
	}
	for _, h := range n.hosts {
		if h.Name == name {
			n.t.Fatalf("netns: host %q exists already", name)
		}
	}
	k := len(n.hosts)
	if k >= 200 {
		n.t.Fatal("netns: at most 200 hosts per network")
	}
	a := n.subnet.Addr().As4()
	a[3] = byte(10 + k)
	h := &Host{Name: name, Namespace: prefix + n.id + "-" + name, IP: netip.AddrFrom4(a), net: n}
	veth := fmt.Sprintf("%s%sv%02x", prefix, n.id, k)
	n.hosts = append(n.hosts, h)
	steps := [][]string{
		{"netns", "add", h.Namespace},
		{"link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", h.Namespace},
		{"link", "set", veth, "master", n.bridge, "up"},
		{"-n", h.Namespace, "addr", "add", netip.PrefixFrom(h.IP, 24).String(), "dev", "eth0"},
		{"-n", h.Namespace, "link", "set", "eth0", "up"},
		{"-n", h.Namespace, "link", "set", "lo", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			n.t.Fatalf("netns: add host %s: %v", name, err)
		}
	}
	return h
}

func validName(s string) bool {
	if s == "" || len(s) > 20 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return true
}

// Addr returns the host's address with port, as "ip:port".
func (h *Host) Addr(port int) string {
	return netip.AddrPortFrom(h.IP, uint16(port)).String()
}

// SetHosts gives the host an /etc/hosts of its own (bind-mounted by `ip
// netns exec` over /etc/hosts for the processes started after this call),
// mapping each name to its addresses: a stand-in for cluster DNS, such as
// a headless Service that resolves to one address per replica.
func (h *Host) SetHosts(names map[string][]netip.Addr) {
	h.net.t.Helper()
	var b strings.Builder
	b.WriteString("127.0.0.1 localhost\n")
	for name, addrs := range names {
		for _, a := range addrs {
			fmt.Fprintf(&b, "%s %s\n", a, name)
		}
	}
	dir := filepath.Join(netnsEtc, h.Namespace)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		h.net.t.Fatalf("netns: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte(b.String()), 0o644); err != nil {
		h.net.t.Fatalf("netns: %v", err)
	}
}

// Command returns a command that runs program inside the host's
// namespace. It gets SIGKILL when the test process dies, so a crashed
// test leaves no server behind.
func (h *Host) Command(program string, args ...string) *exec.Cmd {
	cmd := exec.Command("ip", append([]string{"netns", "exec", h.Namespace, program}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// teardown kills every process left in the namespaces and removes them,
// their /etc/netns files and the bridge.
func (n *Network) teardown() {
	var errs []error
	for _, h := range n.hosts {
		errs = append(errs, removeNamespace(h.Namespace))
	}
	if linkExists(n.bridge) {
		errs = append(errs, ip("link", "del", n.bridge))
	}
	if err := errors.Join(errs...); err != nil {
		n.t.Errorf("netns: teardown: %v", err)
	}
}

// removeNamespace kills the processes of namespace ns, deletes it (which
// deletes its veth pair) and its /etc/netns directory.
func removeNamespace(ns string) error {
	var errs []error
	if out, err := ipOutput("netns", "pids", ns); err == nil {
		for _, f := range strings.Fields(out) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if namespaceExists(ns) {
		errs = append(errs, ip("netns", "del", ns))
	}
	if err := os.RemoveAll(filepath.Join(netnsEtc, ns)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func namespaceExists(ns string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", ns))
	return err == nil
}

func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// Sweep removes the namespaces, links and /etc/netns directories that a
// test process which no longer runs left behind. Objects of live processes
// are left alone, so tests in several processes may run at once.
func Sweep() error {
	var errs []error
	out, err := ipOutput("netns", "list")
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && stale(f[0]) {
			errs = append(errs, removeNamespace(f[0]))
		}
	}
	if entries, err := os.ReadDir(netnsEtc); err == nil {
		for _, e := range entries {
			if stale(e.Name()) {
				errs = append(errs, os.RemoveAll(filepath.Join(netnsEtc, e.Name())))
			}
		}
	}
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return errors.Join(append(errs, err)...)
	}
	for _, l := range links {
		if stale(l.Name()) && linkExists(l.Name()) {
			errs = append(errs, ip("link", "del", l.Name()))
		}
	}
	return errors.Join(errs...)
}

// stale reports whether name is one of ours and its process is gone.
func stale(name string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || len(rest) < 8 {
		return false
	}
	pid, err := strconv.ParseInt(rest[:6], 16, 32)
	if err != nil {
		return false
	}
	if _, err := hex.DecodeString(rest[6:8]); err != nil {
		return false
	}
	return syscall.Kill(int(pid), 0) == syscall.ESRCH
}

// ip runs ip(8) with args.
func ip(args ...string) error {
	_, err := ipOutput(args...)
	return err
}

// ipOutput runs ip(8) with args and returns its standard output.
func ipOutput(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}
