//go:build linux

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
	// None runs commands without file-system confinement.
	None Mode = iota
	// WorkspaceWrite lets commands write only beneath the workspace and
	// the policy's writable paths; they may read everywhere.
	WorkspaceWrite
	// ReadOnly lets commands write only beneath the policy's writable
	// paths (temporary directories); the workspace is read-only.
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

// ParseMode is the inverse of Mode.String. The empty string means None, so
// that an unset configuration value keeps commands unconfined explicitly
// rather than failing.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "", "none":
		return None, nil
	case "workspace-write":
		return WorkspaceWrite, nil
	case "read-only":
		return ReadOnly, nil
	default:
		return None, fmt.Errorf("unknown sandbox mode %q (want none, workspace-write or read-only)", s)
	}
}

// Policy is everything that decides how one environment's commands run.
type Policy struct {
	// Mode is the file-system confinement.
	Mode Mode
	// Workspace is the absolute path of the workspace directory. It is
	// required unless Mode is None.
	Workspace string
	// WritablePaths are further absolute paths (temporary directories, the
	// environment's scratch directory) that commands may write beneath in
	// WorkspaceWrite and ReadOnly modes. A path that does not exist when a
	// command starts is skipped, which only ever denies more.
	WritablePaths []string
	// NoNetwork runs commands in a new network namespace whose only
	// interface is a loopback of their own.
	NoNetwork bool
}

// confined reports whether commands under p need the sandbox-exec
// trampoline (Landlock, or setting up the fresh network namespace).
func (p Policy) confined() bool { return p.Mode != None || p.NoNetwork }

// validate checks the policy's own consistency, independently of what the
// host supports.
func (p Policy) validate() error {
	switch p.Mode {
	case None, WorkspaceWrite, ReadOnly:
	default:
		return fmt.Errorf("invalid sandbox mode %d", int(p.Mode))
	}
	if p.Mode == None {
		return nil
	}
	if p.Workspace == "" {
		return fmt.Errorf("sandbox mode %s needs a workspace path", p.Mode)
	}
	if !filepath.IsAbs(p.Workspace) {
		return fmt.Errorf("sandbox workspace %q is not an absolute path", p.Workspace)
	}
	for _, w := range p.WritablePaths {
		if w == "" || !filepath.IsAbs(w) {
			return fmt.Errorf("sandbox writable path %q is not an absolute path", w)
		}
	}
	if p.Mode == ReadOnly {
		// Landlock rights only add up: a grant on a parent directory
		// cannot be taken back for a subdirectory. A workspace beneath
		// a writable path would silently be writable.
		ws := resolve(p.Workspace)
		for _, w := range p.WritablePaths {
			if within(ws, resolve(w)) {
				return fmt.Errorf("sandbox mode read-only cannot be enforced: workspace %s lies beneath writable path %s", p.Workspace, w)
			}
		}
	}
	return nil
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
