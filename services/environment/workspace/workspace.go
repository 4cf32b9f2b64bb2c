// Package workspace confines file paths to an environment's workspace: a
// path given by a tool call resolves inside the workspace or is refused, and
// that includes symbolic links whose target lies outside.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ErrOutside is wrapped by every refusal of a path outside the allowed
// directories.
var ErrOutside = errors.New("path is outside the workspace")

// Root is a workspace directory plus further directories that may be read
// (such as the environment's archive of truncated outputs).
type Root struct {
	dir      string // absolute, symbolic links resolved
	readable []string
}

// New returns the Root for dir, which must exist. readable lists extra
// directories that reads may reach.
func New(dir string, readable ...string) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	r := &Root{dir: real}
	for _, d := range readable {
		if rd, err := filepath.EvalSymlinks(d); err == nil {
			r.readable = append(r.readable, rd)
		} else if a, err := filepath.Abs(d); err == nil {
			r.readable = append(r.readable, filepath.Clean(a))
		}
	}
	return r, nil
}

// Dir returns the workspace's absolute path with symbolic links resolved.
func (r *Root) Dir() string { return r.dir }

// Rel returns path relative to the workspace when it lies inside it, and
// path itself otherwise, for messages.
func (r *Root) Rel(path string) string {
	if rel, err := filepath.Rel(r.dir, path); err == nil && !strings.HasPrefix(rel, "..") {
		return rel
	}
	return path
}

// ResolveWrite resolves a path that a tool will create or modify: it must
// lie inside the workspace itself.
func (r *Root) ResolveWrite(path string) (string, error) {
	return r.resolve(path, []string{r.dir})
}

// ResolveRead resolves a path that a tool will only read: it may also lie in
// one of the readable directories.
func (r *Root) ResolveRead(path string) (string, error) {
	return r.resolve(path, append([]string{r.dir}, r.readable...))
}

// resolve makes path absolute (relative paths are taken from the
// workspace), cleans it, follows every symbolic link along the part that
// exists, and checks that the result stays inside one of allowed. It
// returns the resolved path.
func (r *Root) resolve(path string, allowed []string) (string, error) {
	if path == "" {
		return "", errors.New("the path is empty")
	}
	if strings.ContainsRune(path, 0) {
		return "", errors.New("the path contains a NUL byte")
	}
	p := path
	if !filepath.IsAbs(p) {
		p = filepath.Join(r.dir, p)
	}
	p = filepath.Clean(p)
	real, err := evalExisting(p)
	if err != nil {
		return "", fmt.Errorf("resolving %q: %w", path, err)
	}
	if insideAny(real, allowed) {
		return real, nil
	}
	if insideAny(p, allowed) {
		return "", fmt.Errorf("%w: %q leads through a symbolic link to %s, which is not inside the workspace %s", ErrOutside, path, real, r.dir)
	}
	return "", fmt.Errorf("%w: %q is %s, which is not inside the workspace %s", ErrOutside, path, p, r.dir)
}

// evalExisting resolves symbolic links in the longest existing prefix of p
// and appends the rest, so that a file about to be created is checked
// through the directories that will hold it. A dangling symbolic link is
// followed too: writing through it would create its target.
func evalExisting(p string) (string, error) {
	var rest []string
	cur := p
	for hops := 0; ; {
		info, err := os.Lstat(cur)
		if err == nil {
			if info.Mode()&fs.ModeSymlink != 0 {
				target, err := os.Readlink(cur)
				if err != nil {
					return "", err
				}
				if hops++; hops > 40 {
					return "", errors.New("too many levels of symbolic links")
				}
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(cur), target)
				}
				cur = filepath.Clean(target)
				continue
			}
			real, err := filepath.EvalSymlinks(cur)
			if err != nil {
				return "", err
			}
			for i := len(rest) - 1; i >= 0; i-- {
				real = filepath.Join(real, rest[i])
			}
			return real, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(cur)
		if parent == cur {
			return p, nil
		}
		rest = append(rest, filepath.Base(cur))
		cur = parent
	}
}

// insideAny reports whether p is one of dirs or lies beneath one of them.
func insideAny(p string, dirs []string) bool {
	for _, d := range dirs {
		if p == d || strings.HasPrefix(p, strings.TrimSuffix(d, string(filepath.Separator))+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
