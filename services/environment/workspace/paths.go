package workspace

import (
	"errors"
	"path"
	"runtime"
	"strings"
)

// pathSyntax is how a system spells paths. Locate's lexical checks take
// it as a value rather than reading path/filepath's behaviour for this
// system, so that the Windows spelling (backslashes, drive letters, names
// compared without case) is tested on every system.
type pathSyntax struct {
	// windows: both slashes separate names, a drive letter or a leading
	// separator makes a path not relative to the workspace even where it
	// is not absolute either ("C:x", `\x`), and names compare without
	// case, as NTFS and the drive letters do.
	windows bool
}

// hostSyntax is this system's.
var hostSyntax = pathSyntax{windows: runtime.GOOS == "windows"}

// sep is the separator the system writes.
func (s pathSyntax) sep() string {
	if s.windows {
		return `\`
	}
	return "/"
}

// toSlash turns a path of this syntax into slash-separated names.
func (s pathSyntax) toSlash(p string) string {
	if s.windows {
		return strings.ReplaceAll(p, `\`, "/")
	}
	return p
}

// errNotRelative is why a path that is neither absolute nor relative to
// the workspace (Windows' `\x` and "C:x") is refused: its meaning
// depends on the service's current drive and directory.
var errNotRelative = errors.New("is relative to the current drive or directory of the service, not to the workspace: give it from the workspace, or in full with its drive letter")

// relativeName maps a relative path, already cleaned by filepath.Clean,
// to its slash-separated name inside the workspace. ok is false for one
// that leads out of it; err is set for one that is not relative to the
// workspace at all.
func (s pathSyntax) relativeName(clean string) (name string, ok bool, err error) {
	if s.windows && (strings.HasPrefix(clean, `\`) || strings.HasPrefix(clean, "/") || len(clean) >= 2 && clean[1] == ':') {
		return "", false, errNotRelative
	}
	name = path.Clean(s.toSlash(clean))
	if name == ".." || strings.HasPrefix(name, "../") {
		return "", false, nil
	}
	return name, true, nil
}

// inside returns the slash-separated name of p relative to dir when p is
// dir or lies beneath it; both are absolute and cleaned by filepath.Clean.
// On Windows names compare without case: a check that says "inside" for
// another spelling of the same directory only names a path that is then
// opened beneath the tree's handle, so it cannot lead out.
func (s pathSyntax) inside(p, dir string) (string, bool) {
	same := func(a, b string) bool { return a == b }
	if s.windows {
		same = strings.EqualFold
	}
	if same(p, dir) {
		return ".", true
	}
	prefix := strings.TrimSuffix(dir, s.sep()) + s.sep()
	if len(p) <= len(prefix) || !same(p[:len(prefix)], prefix) {
		return "", false
	}
	return s.toSlash(p[len(prefix):]), true
}

// join appends the slash-separated name to the absolute directory dir, in
// the system's spelling.
func (s pathSyntax) join(dir, name string) string {
	if name == "." || name == "" {
		return dir
	}
	if s.windows {
		name = strings.ReplaceAll(name, "/", `\`)
	}
	return strings.TrimSuffix(dir, s.sep()) + s.sep() + name
}
