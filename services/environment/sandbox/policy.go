package sandbox

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// Mode says how a command's writes to the file system are confined.
type Mode int

const (
	// None runs commands without confinement, with the service's own
	// powers.
	None Mode = iota
	// WorkspaceWrite lets commands write only beneath the workspace, the
	// environment's temporary directory and the policy's writable paths;
	// they may read everywhere else.
	WorkspaceWrite
	// ReadOnly is WorkspaceWrite with the workspace read-only too.
	ReadOnly
)

// String returns the spelling used on the sandbox-exec command line and in
// configuration: "none", "workspace-write" or "read-only".
func (m Mode) String() string {
	switch m {
	case None:
		return "none"
	case WorkspaceWrite:
		return "workspace-write"
	case ReadOnly:
		return "read-only"
	default:
		return fmt.Sprintf("Mode(%d)", int(m))
	}
}

// ParseMode is the inverse of Mode.String.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "none":
		return None, nil
	case "workspace-write":
		return WorkspaceWrite, nil
	case "read-only":
		return ReadOnly, nil
	default:
		return None, fmt.Errorf("unknown sandbox mode %q (want none, workspace-write or read-only)", s)
	}
}

// Network says what commands can reach over the network.
type Network int

const (
	// NetworkHost shares the host's network, its loopback and every
	// service listening there included. Only mode None may use it.
	NetworkHost Network = iota
	// NetworkNone gives the environment a network namespace of its own
	// whose only interface is its own loopback: servers a command starts
	// are reachable by the environment's other commands, nothing else is.
	NetworkNone
	// NetworkProxy is NetworkNone plus an HTTP proxy on the namespace's
	// loopback (ProxyPort), which forwards to the service's egress proxy:
	// public addresses only, as the service's own URL fetches.
	NetworkProxy
)

// String returns the spelling used in configuration: "host", "none" or
// "proxy".
func (n Network) String() string {
	switch n {
	case NetworkHost:
		return "host"
	case NetworkNone:
		return "none"
	case NetworkProxy:
		return "proxy"
	default:
		return fmt.Sprintf("Network(%d)", int(n))
	}
}

// ParseNetwork is the inverse of Network.String.
func ParseNetwork(s string) (Network, error) {
	switch s {
	case "host":
		return NetworkHost, nil
	case "none":
		return NetworkNone, nil
	case "proxy":
		return NetworkProxy, nil
	default:
		return NetworkHost, fmt.Errorf("unknown network access %q (want none, proxy or host)", s)
	}
}

// ProxyPort is the port on each environment's own loopback where commands
// with NetworkProxy find the HTTP proxy (HTTP_PROXY and HTTPS_PROXY point
// there). The namespace is the environment's own, so no other program on
// the host competes for the port.
const ProxyPort = 3128

// Identity is the user and group a confined command runs as.
type Identity struct {
	UID, GID uint32
}

// DefaultIdentity is the identity of confined commands unless configured:
// nobody and nogroup, which own no files and run nothing on a usual host.
var DefaultIdentity = Identity{UID: 65534, GID: 65534}

// ParseIdentity reads "UID" or "UID:GID" (numbers; GID defaults to UID).
func ParseIdentity(s string) (Identity, error) {
	var id Identity
	u, g, hasGroup := strings.Cut(s, ":")
	if _, err := fmt.Sscanf(u, "%d", &id.UID); err != nil || fmt.Sprint(id.UID) != u {
		return id, fmt.Errorf("sandbox user %q: want a numeric UID or UID:GID", s)
	}
	id.GID = id.UID
	if hasGroup {
		if _, err := fmt.Sscanf(g, "%d", &id.GID); err != nil || fmt.Sprint(id.GID) != g {
			return id, fmt.Errorf("sandbox user %q: want a numeric UID or UID:GID", s)
		}
	}
	if id.UID == 0 || id.GID == 0 {
		return id, fmt.Errorf("sandbox user %q: confined commands never run as root", s)
	}
	return id, nil
}

// String returns "UID:GID".
func (id Identity) String() string { return fmt.Sprintf("%d:%d", id.UID, id.GID) }

// Policy is everything that decides how one environment's commands run.
type Policy struct {
	// Mode is the file-system confinement.
	Mode Mode
	// Workspace is the absolute path of the workspace directory. It is
	// required unless Mode is None.
	Workspace string
	// WritablePaths are further absolute paths that confined commands may
	// write beneath (a shared cache, say). Their owners and permissions
	// must let User write. A path that does not exist when the
	// environment starts is skipped, which only ever denies more.
	WritablePaths []string
	// Network is what commands can reach. Confined modes need NetworkNone
	// or NetworkProxy.
	Network Network
	// ProxySocket is the Unix socket of the service's egress proxy, which
	// NetworkProxy forwards to; it is opened once, when the environment
	// starts.
	ProxySocket string
	// User is who confined commands run as; the zero value means
	// DefaultIdentity. The workspace appears to them as theirs (an
	// idmapped mount), while files keep their owner on disk.
	User Identity
	// Limits bound what the environment's commands use together; zero
	// fields mean the defaults (DefaultLimits).
	Limits Limits
	// HidePaths are files or directories that confined commands see empty
	// (the service's auth token file, say).
	HidePaths []string
	// Siblings is a directory that holds the workspace and other
	// environments' workspaces (the service's root): confined commands
	// see it empty but for their own workspace and the writable paths
	// beneath it, whatever the other workspaces' permissions. Empty, the
	// workspace itself, a directory the workspace does not lie beneath,
	// or one beneath a writable path hides nothing.
	Siblings string
}

// hidesSiblings reports whether the environment's view covers
// Siblings: it must lie strictly above the workspace, and below every
// writable path's tree (a writable path that holds Siblings is attached
// over the cover, with the siblings in it).
func (p Policy) hidesSiblings() bool {
	if p.Siblings == "" || p.Siblings == "/" || p.Workspace == p.Siblings || !within(p.Workspace, p.Siblings) {
		return false
	}
	for _, w := range p.WritablePaths {
		if within(p.Siblings, w) {
			return false
		}
	}
	return true
}

// confined reports whether commands under p run in the environment's
// namespaces, as another user, with Landlock and seccomp.
func (p Policy) confined() bool { return p.Mode != None }

// isolated reports whether commands under p need an environment of their
// own (Env): a confined mode, or a network namespace.
func (p Policy) isolated() bool { return p.confined() || p.Network != NetworkHost }

// withDefaults fills in the zero fields.
func (p Policy) withDefaults() Policy {
	if p.User == (Identity{}) {
		p.User = DefaultIdentity
	}
	p.Limits = p.Limits.withDefaults()
	return p
}

// validate checks the policy's own consistency, independently of what the
// host supports.
func (p Policy) validate() error {
	switch p.Mode {
	case None, WorkspaceWrite, ReadOnly:
	default:
		return fmt.Errorf("invalid sandbox mode %d", int(p.Mode))
	}
	switch p.Network {
	case NetworkHost, NetworkNone:
	case NetworkProxy:
		if p.ProxySocket == "" {
			return errors.New("network access proxy needs the egress proxy's socket")
		}
	default:
		return fmt.Errorf("invalid network access %d", int(p.Network))
	}
	if p.Mode == None {
		return nil
	}
	if p.Network == NetworkHost {
		return fmt.Errorf("sandbox mode %s cannot share the host's network: its commands would reach every service on the host's loopback, this one included (use network none or proxy)", p.Mode)
	}
	if p.Workspace == "" {
		return fmt.Errorf("sandbox mode %s needs a workspace path", p.Mode)
	}
	if !filepath.IsAbs(p.Workspace) {
		return fmt.Errorf("sandbox workspace %q is not an absolute path", p.Workspace)
	}
	if p.Siblings != "" && !filepath.IsAbs(p.Siblings) {
		return fmt.Errorf("sandbox path %q is not an absolute path", p.Siblings)
	}
	for _, list := range [][]string{p.WritablePaths, p.HidePaths} {
		for _, w := range list {
			if w == "" || !filepath.IsAbs(w) {
				return fmt.Errorf("sandbox path %q is not an absolute path", w)
			}
		}
	}
	if p.User.UID == 0 || p.User.GID == 0 {
		if p.User != (Identity{}) {
			return errors.New("confined commands never run as root")
		}
	}
	if p.Mode == ReadOnly {
		// Landlock rights only add up: a grant on a parent directory
		// cannot be taken back for a subdirectory. A workspace beneath
		// a writable path would silently be writable.
		ws := resolve(p.Workspace)
		for _, w := range p.WritablePaths {
			if within(ws, resolve(w)) {
				return fmt.Errorf("%w: sandbox mode read-only cannot be enforced: workspace %s lies beneath writable path %s", ErrUnsupported, p.Workspace, w)
			}
		}
	}
	return p.Limits.validate()
}

// resolve returns path with symbolic links evaluated when it exists, and
// cleaned otherwise: Landlock attaches rules to the resolved directory.
func resolve(path string) string {
	if r, err := filepath.EvalSymlinks(path); err == nil {
		return r
	}
	return filepath.Clean(path)
}

// within reports whether path is dir or lies beneath it.
func within(path, dir string) bool {
	if path == dir || dir == "/" {
		return true
	}
	return strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// ErrUnsupported is wrapped by every error that says the host cannot
// enforce a policy, so that callers can answer "failed precondition"
// rather than "invalid argument".
var ErrUnsupported = errors.New("sandbox cannot be enforced on this host")
