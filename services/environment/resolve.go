package environment

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// resolveWorkspace makes the requested workspace absolute, refuses one
// outside the root, inside the scratch area or containing it, and creates
// it beneath the root (given to the root's owner when the service runs as
// root, see workspace.MkdirAll), unless it must exist already.
func (s *Service) resolveWorkspace(requested string, mustExist bool) (string, error) {
	p, err := s.workspacePath(requested)
	if err != nil {
		return "", err
	}
	// Most sessions name a workspace that exists: it is resolved, and
	// checked, without a walk to make its directories. One that cannot
	// be resolved yet is made, then resolved, as before.
	if real, err := s.realWorkspace(requested, p); err == nil {
		return real, nil
	}
	if mustExist {
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			return "", invalid("workspace %q does not exist; create the directory first, or check the path", requested)
		}
	}
	rel, err := filepath.Rel(s.root, p)
	if err != nil {
		return "", invalid("workspace %q: %v", requested, err)
	}
	// Its directories may be made inside another workspace (see
	// writeTracker).
	end := s.writes.begin()
	err = workspace.MkdirAll(s.root, filepath.ToSlash(rel))
	end()
	if err != nil {
		return "", invalid("workspace %q cannot be created: %v", requested, err)
	}
	return s.realWorkspace(requested, p)
}

// workspacePath makes the requested workspace absolute and refuses one
// whose path lies outside the root.
func (s *Service) workspacePath(requested string) (string, error) {
	if strings.TrimSpace(requested) == "" {
		return "", invalid("a workspace directory is required")
	}
	p := requested
	if !filepath.IsAbs(p) {
		p = filepath.Join(s.root, p)
	}
	p = filepath.Clean(p)
	if !within(p, s.root) {
		return "", invalid("workspace %q is outside the service root %s", requested, s.root)
	}
	return p, nil
}

// realWorkspace resolves the links of the existing workspace directory p
// and refuses one that leads outside the root, inside the scratch area or
// around it.
func (s *Service) realWorkspace(requested, p string) (string, error) {
	real, isDir, err := resolvePath(p)
	if err != nil {
		return "", invalid("workspace %q: %v", requested, err)
	}
	if !within(real, s.root) {
		return "", invalid("workspace %q leads through a symbolic link to %s, outside the service root %s", requested, real, s.root)
	}
	if !isDir {
		return "", invalid("workspace %q is not a directory", requested)
	}
	if within(real, s.opts.ScratchDir) {
		return "", invalid("workspace %q lies inside the service's scratch area", requested)
	}
	if within(s.opts.ScratchDir, real) {
		return "", invalid("workspace %q contains the service's scratch area %s, where the archives of truncated output are kept; "+
			"choose a workspace beside it, or start the service with its scratch directory elsewhere", requested, s.opts.ScratchDir)
	}
	return real, nil
}

// within reports whether the clean path p is dir or lies beneath it. It
// allocates nothing: a call checks the workspace against the root and the
// scratch area several times, and the joined prefix it built was a
// sixteenth of a task's allocations in the service.
func within(p, dir string) bool {
	if p == dir || dir == "/" {
		return true
	}
	dir = strings.TrimSuffix(dir, "/")
	return len(p) > len(dir) && p[len(dir)] == '/' && strings.HasPrefix(p, dir)
}

// resolvePath is filepath.EvalSymlinks of the absolute, clean path p,
// and whether it leads to a directory. A path without a symbolic link, as
// a workspace's usually is, is its own resolution: on Linux one openat2
// tells that it is a directory reached through no link (linkFreeDir),
// elsewhere each of its directories is stated once (EvalSymlinks builds
// the path again as it goes, and the workspace is resolved at every
// checkpoint). A path with a link, or on Windows (whose volume names this
// does not parse), is resolved by EvalSymlinks.
func resolvePath(p string) (string, bool, error) {
	if linkFreeDir(p) {
		return p, true, nil
	}
	if runtime.GOOS != "windows" {
		for i := 1; i <= len(p); i++ {
			if i < len(p) && p[i] != '/' {
				continue
			}
			info, err := lstat(p[:i])
			if err != nil {
				return "", false, err
			}
			if info.Mode()&fs.ModeSymlink != 0 {
				break
			}
			if i == len(p) {
				return p, info.IsDir(), nil
			}
		}
	}
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return "", false, err
	}
	info, err := os.Stat(real)
	if err != nil {
		return "", false, err
	}
	return real, info.IsDir(), nil
}

// lstat is os.Lstat, which a test counts.
var lstat = os.Lstat
