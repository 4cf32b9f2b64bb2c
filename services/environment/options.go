package environment

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/penguin-agent/penguin/services/environment/checkpoint"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// DefaultOutputCeiling caps a tool's output, in characters, even when its
// own cap is turned off: the complete output is one message, and a runaway
// command must not exhaust memory or message size limits.
const DefaultOutputCeiling = 4 << 20

// DefaultScratchLimit is the default of Options.ScratchLimit: room for
// about thirty of the largest archives (8 MiB each).
const DefaultScratchLimit = 256 << 20

// DefaultScratchDir is where archives go when Options.ScratchDir is empty:
// the user's cache directory ($XDG_CACHE_HOME/penguin/scratch), or, when
// that lies inside root (a root at the home directory), a private
// directory in the system's temporary directory. A root of "/" keeps the
// cache directory: every path lies inside it, and the check that no
// workspace contains the scratch directory still holds.
func DefaultScratchDir(root string) string {
	var candidates []string
	if cache, err := os.UserCacheDir(); err == nil {
		candidates = append(candidates, filepath.Join(cache, "penguin", "scratch"))
	}
	candidates = append(candidates, filepath.Join(os.TempDir(), fmt.Sprintf("penguin-%d", os.Geteuid()), "scratch"))
	for _, c := range candidates {
		if !within(resolveExisting(c), root) {
			return c
		}
	}
	return candidates[0]
}

// resolveExisting resolves symbolic links in the longest existing prefix
// of the absolute path p and appends the rest.
func resolveExisting(p string) string {
	p = filepath.Clean(p)
	var rest []string
	for cur := p; ; {
		if real, err := filepath.EvalSymlinks(cur); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p
		}
		rest = append([]string{filepath.Base(cur)}, rest...)
		cur = parent
	}
}

// openScratch creates the scratch directory when missing and opens it as
// a handle. A directory that another user owns, or that others may write
// to, is refused: they could read the archives or plant links in it.
func openScratch(dir string) (*os.Root, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	info, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("scratch directory: %w", err)
	}
	if uid, ok := ownerUID(info); ok && uid != os.Geteuid() {
		return nil, fmt.Errorf("scratch directory %s belongs to uid %d, not to this service (uid %d)", real, uid, os.Geteuid())
	}
	if info.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("scratch directory %s is writable by others (mode %v); make it private (chmod 700)", real, info.Mode().Perm())
	}
	return os.OpenRoot(real)
}

// CheckpointRetention bounds what each workspace's checkpoint store keeps,
// named here for the service's clients (flags, configuration), which see
// only this package.
type CheckpointRetention = checkpoint.Retention

// DefaultCheckpointRetention is the retention of a service told none,
// for the flags that show it.
func DefaultCheckpointRetention() CheckpointRetention { return checkpoint.DefaultRetention }

// Options configure a Service.
type Options struct {
	// Root is the directory every workspace must lie under. It is
	// required.
	Root string
	// ScratchDir holds the environments' archives of truncated output, one
	// directory per environment label. It must lie outside every
	// workspace (a workspace that contains it is refused), and it should
	// not be writable by commands. Empty means DefaultScratchDir(Root).
	ScratchDir string
	// ScratchLimit bounds, in bytes, the disk used by the archives of
	// one scratch directory (one label); beyond it the oldest archives
	// are removed first. Zero means DefaultScratchLimit.
	ScratchLimit int64
	// Checkpoints bounds the workspace checkpoints that turns' undo rests
	// on (CheckpointWorkspace); zero means checkpoint.DefaultLimits.
	Checkpoints checkpoint.Limits
	// CheckpointRetention bounds what each workspace's checkpoint store
	// keeps, oldest collected first; zero fields mean
	// checkpoint.DefaultRetention's.
	CheckpointRetention checkpoint.Retention
	// Env is the base environment of commands; nil means this process's.
	// Penguin's own variables and provider credentials are removed from
	// it (see CommandEnv).
	Env []string
	// Shell runs commands; empty means bash.
	Shell string
	// Self is the sandbox trampoline, started with "sandbox-exec" as its
	// first argument; empty means sandbox.Trampoline() (penguin-sandbox
	// beside this binary, else this binary itself).
	Self string
	// DefaultSandbox is the sandbox mode of environments that do not ask
	// for one; empty means workspace-write where the host can enforce it
	// and none where it cannot (New logs which, and why).
	DefaultSandbox string
	// DefaultNetwork is the network access of confined environments that
	// do not ask for one: "none" (empty) or "proxy".
	DefaultNetwork string
	// SandboxRequired refuses sandbox mode none, asked for or as the
	// default: every environment is confined, or the service does not
	// start (a pod that serves many sessions, whose commands must never
	// run as the service with its token and capabilities).
	SandboxRequired bool
	// SandboxUser is who confined commands run as; the zero value means
	// sandbox.DefaultIdentity (nobody).
	SandboxUser sandbox.Identity
	// Limits bound each environment's commands together; zero fields
	// mean sandbox.DefaultLimits.
	Limits sandbox.Limits
	// WritablePaths are directories confined commands may write besides
	// the workspace and the environment's own /tmp (a shared cache, say);
	// their permissions must let SandboxUser write.
	WritablePaths []string
	// HidePaths are files confined commands see empty, such as the
	// service's auth token file.
	HidePaths []string
	// ProfileTimeout bounds the login shell that takes each environment's
	// shell snapshot; zero means command.DefaultProfileTimeout.
	ProfileTimeout time.Duration
	// MaxSessions caps the command sessions per environment; zero means
	// command.MaxSessions.
	MaxSessions int
	// OutputCeiling is the hard cap on one output in characters; zero
	// means DefaultOutputCeiling, negative means none.
	OutputCeiling int
	// Grace is how long a cancelled tool may take to return; zero means
	// framing.DefaultGrace.
	Grace time.Duration
	// NoCgroups tracks commands by process group and session only, never
	// by a per-command cgroup: a command starts faster (no cgroup to
	// create and clone into, about 2 ms on a cgroup-v2 host), but a daemon
	// that double-forked out of its session survives a kill.
	NoCgroups bool
	// CheckSandbox tells whether the host can enforce a sandbox policy;
	// nil means sandbox.Check.
	CheckSandbox func(sandbox.Policy) error
	// HostLimitations are what this system lacks that the sandbox does on
	// Linux, one sentence each: logged once on the service's first lines
	// and returned by every DescribeWorkspace. nil means
	// sandbox.Unavailable() (nothing on Linux; tests set it to see the
	// reporting there).
	HostLimitations []string
	// Logger receives the service's events; nil discards them.
	Logger *slog.Logger
	// Version identifies penguin to MCP servers.
	Version string
	// Advertise is the address at which callers must reach the
	// environments of this replica, returned by CreateEnvironment: with
	// several replicas behind one name, an environment lives on the
	// replica that created it, and the engine binds its session to this
	// address. Empty means the caller's address is already the right one
	// (a single replica).
	Advertise string
	// FetchAllow lists the internal address prefixes (loopback, private,
	// link-local, ...) that tools fetching URLs for a model (read_image)
	// may reach all the same; by default they reach only public
	// addresses, and nothing in environments without network.
	FetchAllow []netip.Prefix
	// Registerer receives the service's metrics (tool runs, environments,
	// command sessions); nil keeps them unregistered.
	Registerer prometheus.Registerer
}
