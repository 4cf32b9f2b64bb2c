// Package workspace is the environment service's only way to touch files.
// Every file operation of the file tools (read, write, edit, list, search,
// read an image) goes through a directory handle opened once, when the
// environment is created, with Go's os.Root: each path component is opened
// relative to the one before it without following symbolic links, and a
// link is followed by reading it and resolving its target inside the same
// handle. So no "..", no symbolic link (relative or absolute) and no swap
// of a directory for a link while a call runs leads out of the directory:
// a check and the use that follows it are one and the same open. Renaming
// or replacing the workspace directory itself after creation does not move
// the handle either.
//
// os.Root does not protect against what is not a path: a regular file may
// be a hard link to a file elsewhere, and a path may name a device, a named
// pipe or a socket. So the package opens every file without blocking and
// checks what it opened: only regular files are read or written, and a
// write refuses a file with more than one link (it could be the other name
// of a file outside). Reads through hard links are allowed, so that package
// stores that link their files (pnpm) stay readable: on Linux with
// fs.protected_hardlinks set, as it is by default, a command can only link
// files it may read and write itself, so a link grants the file tools
// nothing the command did not already have.
//
// Absolute symbolic links are not followed even when they point back inside
// the workspace: their meaning depends on where the directory is mounted,
// and os.Root refuses them.
package workspace

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
)

// ErrOutside is wrapped by every refusal of a path outside the allowed
// directories.
var ErrOutside = errors.New("path is outside the workspace")

// ErrIsDir is wrapped by the refusal to open a directory as a file.
var ErrIsDir = errors.New("is a directory")

// ErrNotRegular is wrapped by the refusal to open something that is
// neither a regular file nor a directory (a named pipe, a device, a
// socket).
var ErrNotRegular = errors.New("is not a regular file")

// ErrTooLarge is wrapped by Tree.ReadFile when a file exceeds its limit.
var ErrTooLarge = errors.New("file is too large")

// Tree is one directory the service works beneath, held open as a handle
// for as long as the environment lives.
type Tree struct {
	dir      string // the absolute path the handle was opened at, for messages
	root     *os.Root
	relative bool // paths in this tree are shown relative to it
	// owner is who the files and directories the tree creates belong
	// to, when that is not this process's user: the owner of the
	// tree's directory, for a service that runs as root (see ownerOf).
	// It is asked at the first entry the tree creates, not when the
	// handle is opened: most handles (a checkpoint's, an environment's
	// whose tools only read) create none, and the stat was one system
	// call of each. Nil for a tree that never gives its entries away.
	owner func() *owner
}

// creator returns who the tree's new entries are given to, nil when they
// stay this process's user's.
func (t *Tree) creator() *owner {
	if t.owner == nil {
		return nil
	}
	return t.owner()
}

// owner is a user and group that created files are given to.
type owner struct{ uid, gid int }

// Dir returns the absolute path the tree was opened at.
func (t *Tree) Dir() string { return t.dir }

// Show returns how a path inside the tree is shown to the model: relative
// for the workspace, absolute for the other trees.
func (t *Tree) Show(name string) string {
	if t.relative {
		return name
	}
	return hostSyntax.join(t.dir, name)
}

// Stat describes name, following symbolic links that stay inside the tree.
func (t *Tree) Stat(name string) (fs.FileInfo, error) {
	info, err := t.root.Stat(name)
	return info, t.explain(name, err)
}

// ReadDir lists the directory name, sorted by name. It never follows a
// link out of the tree and never blocks on a named pipe.
func (t *Tree) ReadDir(name string) ([]fs.DirEntry, error) {
	f, err := t.root.OpenFile(name, os.O_RDONLY|oDirectory|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, t.explain(name, err)
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	return entries, err
}

// Open opens the regular file name for reading and describes it. A
// directory is refused with ErrIsDir, anything else that is not a regular
// file with ErrNotRegular, before any byte is read.
func (t *Tree) Open(name string) (*os.File, fs.FileInfo, error) {
	// The type is checked before opening, so that a device is not even
	// opened, and again on the open file, which a swap cannot change.
	if info, err := t.root.Stat(name); err != nil {
		return nil, nil, t.explain(name, err)
	} else if err := regular(info); err != nil {
		return nil, nil, err
	}
	f, err := t.root.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, t.explain(name, err)
	}
	info, err := f.Stat()
	if err == nil {
		err = regular(info)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, info, nil
}

// ReadFile returns the content of the regular file name, refusing one
// larger than limit bytes with ErrTooLarge (a file that grows while it is
// read included).
func (t *Tree) ReadFile(name string, limit int64) ([]byte, error) {
	f, info, err := t.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info.Size() > limit {
		return nil, fmt.Errorf("%w: %d bytes, more than %d", ErrTooLarge, info.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%w: more than %d bytes", ErrTooLarge, limit)
	}
	return data, nil
}

// OpenWrite opens the regular file name for reading and writing. With
// create it also creates the file and its missing parent directories when
// needed, and created says whether it did; without, a missing file is an
// fs.ErrNotExist error. An existing file keeps its inode, mode and owner;
// a created file and the directories made for it belong to the
// workspace's owner when the service runs as root (see ownerOf).
// A file with more than one hard link is refused: writing through it could
// change a file outside the tree.
func (t *Tree) OpenWrite(name string, create bool) (f *os.File, info fs.FileInfo, created bool, err error) {
	if dir := path.Dir(name); create && dir != "." {
		if err := t.mkdirAll(dir); err != nil {
			return nil, nil, false, t.explain(dir, err)
		}
	}
	const flags = os.O_RDWR | syscall.O_NONBLOCK | syscall.O_NOCTTY
	if info, err := t.root.Stat(name); err == nil {
		if err := regular(info); err != nil {
			return nil, nil, false, err
		}
	}
	f, err = t.root.OpenFile(name, flags, 0)
	if create && errors.Is(err, fs.ErrNotExist) {
		created = true
		f, err = t.root.OpenFile(name, flags|os.O_CREATE|os.O_EXCL, 0o644)
		if errors.Is(err, fs.ErrExist) {
			// Created meanwhile, or a dangling symbolic link whose target
			// (inside the tree) is created now.
			f, err = t.root.OpenFile(name, flags|os.O_CREATE, 0o644)
		}
	}
	if err != nil {
		return nil, nil, false, t.explain(name, err)
	}
	if o := t.creator(); created && o != nil {
		if err := f.Chown(o.uid, o.gid); err != nil {
			f.Close()
			return nil, nil, false, err
		}
	}
	info, err = f.Stat()
	if err == nil {
		err = regular(info)
	}
	if err == nil && !created {
		if n := hardLinks(info); n > 1 {
			err = fmt.Errorf("it has %d hard links, and a write through a hard link could change a file outside the workspace; "+
				"to replace it, remove it first (exec_command rm) or copy it", n)
		}
	}
	if err != nil {
		f.Close()
		return nil, nil, false, err
	}
	return f, info, created, nil
}

// Replace sets the whole content of a file opened by OpenWrite.
func Replace(f *os.File, content []byte) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err := f.WriteAt(content, 0)
	return err
}

// regular refuses what is not a regular file.
func regular(info fs.FileInfo) error {
	switch m := info.Mode(); {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return ErrIsDir
	case m&fs.ModeNamedPipe != 0:
		return fmt.Errorf("%w: it is a named pipe", ErrNotRegular)
	case m&fs.ModeSocket != 0:
		return fmt.Errorf("%w: it is a socket", ErrNotRegular)
	case m&fs.ModeDevice != 0:
		return fmt.Errorf("%w: it is a device", ErrNotRegular)
	default:
		return ErrNotRegular
	}
}

// explain turns os.Root's refusal of an escape into ErrOutside.
func (t *Tree) explain(name string, err error) error {
	if err == nil {
		return nil
	}
	if isEscape(err) {
		return fmt.Errorf("%w: %q leads through a symbolic link to a place that is not inside the workspace %s "+
			"(links are followed only while they stay inside, and absolute link targets never are)", ErrOutside, t.Show(name), t.dir)
	}
	return err
}

// isEscape reports whether err is os.Root's refusal of a path that leaves
// it. os.Root does not export that error, so it is recognized by its text;
// TestSymlinkOutIsOutside fails if a Go release changes it.
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

// Root is an environment's workspace, which the file tools read and
// write, plus further trees they may only read (such as the archive of
// truncated outputs).
type Root struct {
	ws       *Tree
	readable []*readableTree
}

// Readable is a further tree that reads may reach: a directory's absolute
// path, and how to open it as a handle. It is opened at the first read
// that reaches it, so that a directory that is seldom needed (the archive
// of truncated outputs) need not be made before then: until it is, Open
// returns an error that wraps fs.ErrNotExist, and a read finds nothing
// there. The handle stays the opener's to close.
type Readable struct {
	Dir  string
	Open func() (*os.Root, error)
}

// readableTree is a Readable and, once opened, its Tree.
type readableTree struct {
	Readable
	mu   sync.Mutex
	tree *Tree
}

// get returns the tree, opening it at the first call that finds it.
func (r *readableTree) get() (*Tree, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.tree == nil {
		h, err := r.Open()
		if err != nil {
			return nil, err
		}
		r.tree = &Tree{dir: r.Dir, root: h}
	}
	return r.tree, nil
}

// New opens the workspace directory dir, which must exist, as a handle.
// readable are further trees that reads may reach; their paths must be
// absolute.
func New(dir string, readable ...Readable) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", dir, err)
	}
	return NewResolved(real, readable...)
}

// NewResolved is New for a directory whose path is already absolute and
// resolved (what filepath.EvalSymlinks returns), as the service's checks
// of a requested workspace leave it: resolving it again would state each
// of its parents once more, at every checkpoint.
func NewResolved(real string, readable ...Readable) (*Root, error) {
	h, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", real, err)
	}
	r := &Root{ws: &Tree{dir: real, root: h, relative: true, owner: ownerOnce(h)}}
	for _, x := range readable {
		if !filepath.IsAbs(x.Dir) {
			h.Close()
			return nil, fmt.Errorf("readable directory %q is not absolute", x.Dir)
		}
		x.Dir = filepath.Clean(x.Dir)
		r.readable = append(r.readable, &readableTree{Readable: x})
	}
	return r, nil
}

// ownerOf returns the owner of the tree's directory when this process
// runs as root and another user owns it, else nil. What the file tools
// create then belongs to the workspace's owner, as what its commands
// create does: where the sandbox user owns the workspace itself (no
// idmapped mount, as in a pod with its own user namespace), a file the
// service wrote stays writable to the commands.
func ownerOf(h *os.Root) *owner {
	if euid() != 0 {
		return nil
	}
	info, err := h.Stat(".")
	if err != nil {
		return nil
	}
	uid, gid, ok := fileOwner(info)
	if !ok || (uid == 0 && gid == 0) {
		return nil
	}
	return &owner{uid: uid, gid: gid}
}

// ownerOnce returns ownerOf(h), asked at its first call.
func ownerOnce(h *os.Root) func() *owner {
	return sync.OnceValue(func() *owner { return ownerOf(h) })
}

// euid is this process's effective user id, which the service does not
// change: asked once rather than at every workspace opened.
var euid = sync.OnceValue(os.Geteuid)

// mkdirAll makes dir and its missing parents, each given to the tree's
// owner.
func (t *Tree) mkdirAll(dir string) error {
	o := t.creator()
	if o == nil {
		return t.root.MkdirAll(dir, 0o755)
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := path.Join(parts[:i+1]...)
		err := t.root.Mkdir(p, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err == nil {
			err = t.root.Lchown(p, o.uid, o.gid)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// MkdirAll makes the directory name (slash-separated, relative) beneath
// dir and its missing parents, through a handle on dir, so that no link
// leads the creation out of it. When this process runs as root and
// another user owns dir, what it makes belongs to that user, as the
// files the file tools create in a workspace belong to its owner.
func MkdirAll(dir, name string) error {
	h, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer h.Close()
	t := &Tree{dir: dir, root: h, owner: ownerOnce(h)}
	return t.mkdirAll(name)
}

// Close releases the workspace handle (not the readable trees').
func (r *Root) Close() error { return r.ws.root.Close() }

// Dir returns the workspace's absolute path with symbolic links resolved.
func (r *Root) Dir() string { return r.ws.dir }

// Workspace returns the workspace tree.
func (r *Root) Workspace() *Tree { return r.ws }

// Locate maps a path given by a tool call (absolute, or relative to the
// workspace) to the tree it lies in and the slash-separated name inside
// that tree ("." for the tree itself). Only the workspace is writable; the
// readable trees count when forWrite is false. The check is lexical: what
// the name leads to is decided by the tree's handle when it is used.
func (r *Root) Locate(p string, forWrite bool) (*Tree, string, error) {
	if p == "" {
		return nil, "", errors.New("the path is empty")
	}
	if strings.ContainsRune(p, 0) {
		return nil, "", errors.New("the path contains a NUL byte")
	}
	if !filepath.IsAbs(p) {
		name, ok, err := hostSyntax.relativeName(filepath.Clean(p))
		if err != nil {
			return nil, "", fmt.Errorf("%w: %q %w", ErrOutside, p, err)
		}
		if !ok {
			return nil, "", fmt.Errorf("%w: %q leads out of the workspace, so it is not inside the workspace %s", ErrOutside, p, r.ws.dir)
		}
		return r.ws, name, nil
	}
	clean := filepath.Clean(p)
	if name, ok := hostSyntax.inside(clean, r.ws.dir); ok {
		return r.ws, name, nil
	}
	for _, x := range r.readable {
		name, ok := hostSyntax.inside(clean, x.Dir)
		if !ok || forWrite {
			continue
		}
		t, err := x.get()
		if errors.Is(err, fs.ErrNotExist) {
			return nil, "", fmt.Errorf("%s does not exist", p)
		}
		if err != nil {
			return nil, "", fmt.Errorf("%s: %w", p, err)
		}
		return t, name, nil
	}
	return nil, "", fmt.Errorf("%w: %q is not inside the workspace %s", ErrOutside, p, r.ws.dir)
}

// Lstat describes name without following a final symbolic link.
func (t *Tree) Lstat(name string) (fs.FileInfo, error) {
	info, err := t.root.Lstat(name)
	return info, t.explain(name, err)
}

// Readlink returns the target of the symbolic link name.
func (t *Tree) Readlink(name string) (string, error) {
	target, err := t.root.Readlink(name)
	return target, t.explain(name, err)
}

// Symlink makes name a symbolic link to target, creating its missing
// parent directories. The target is not checked: reads through the link
// are, whenever they follow it.
func (t *Tree) Symlink(target, name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := t.mkdirAll(dir); err != nil {
			return t.explain(dir, err)
		}
	}
	return t.explain(name, t.root.Symlink(target, name))
}

// Remove removes the file, link or empty directory name.
func (t *Tree) Remove(name string) error {
	return t.explain(name, t.root.Remove(name))
}

// Mkdir makes the directory name and its missing parents, given to the
// tree's owner as the file tools' directories are.
func (t *Tree) Mkdir(name string) error {
	return t.explain(name, t.mkdirAll(name))
}
