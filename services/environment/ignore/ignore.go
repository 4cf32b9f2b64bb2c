package ignore

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io/fs"
	"path"
	"runtime"
	"strings"
)

// rule is one gitignore pattern.
type rule struct {
	segs     []string
	negate   bool
	dirOnly  bool
	anchored bool // contains a slash other than a trailing one: matched from the file's directory
}

// ruleSet is the rules of one ignore file, relative to base (a
// slash-separated path from the walk root, "" for the root).
type ruleSet struct {
	base  string
	rules []rule
}

// parseRules reads gitignore syntax; with fold, the rules and base are
// kept in lower case, for a Matcher that compares without case.
func parseRules(base string, data []byte, fold bool) ruleSet {
	if fold {
		base = strings.ToLower(base)
	}
	rs := ruleSet{base: base}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if fold {
			line = strings.ToLower(line)
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		// Trailing spaces are dropped unless escaped.
		for strings.HasSuffix(line, " ") && !strings.HasSuffix(line, `\ `) {
			line = line[:len(line)-1]
		}
		var r rule
		if strings.HasPrefix(line, "!") {
			r.negate = true
			line = line[1:]
		} else if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
			line = line[1:]
		}
		if strings.HasSuffix(line, "/") {
			r.dirOnly = true
			line = strings.TrimRight(line, "/")
		}
		if line == "" {
			continue
		}
		if strings.Contains(line, "/") {
			r.anchored = true
			line = strings.TrimPrefix(line, "/")
		}
		r.segs = strings.Split(line, "/")
		rs.rules = append(rs.rules, r)
	}
	return rs
}

// match reports whether rel (relative to the rule set's base) matches r.
func (r rule) match(rel string, isDir bool) bool {
	if r.dirOnly && !isDir {
		return false
	}
	if r.anchored {
		return matchSegments(r.segs, strings.Split(rel, "/"))
	}
	base := rel
	if i := strings.LastIndexByte(rel, '/'); i >= 0 {
		base = rel[i+1:]
	}
	return matchSegments(r.segs, []string{base})
}

// Matcher decides whether paths are ignored, given the ignore files seen so
// far on the way down from the root.
type Matcher struct {
	sets []ruleSet
	// fold compares names without case, as git does where
	// core.ignorecase is set: on Windows always, on macOS wherever the
	// file system ignores case, as its default one does.
	fold bool
}

// foldCase is whether this system's matchers compare without case (see
// Matcher.fold).
var foldCase = runtime.GOOS == "windows" || runtime.GOOS == "darwin"

// Ignored reports whether rel (slash-separated, from the walk root) is
// ignored. The last matching rule wins, and deeper ignore files come later.
func (m *Matcher) Ignored(rel string, isDir bool) bool {
	if m.fold {
		rel = strings.ToLower(rel)
	}
	ignored := false
	for _, rs := range m.sets {
		sub := rel
		if rs.base != "" {
			if !strings.HasPrefix(rel, rs.base+"/") {
				continue
			}
			sub = rel[len(rs.base)+1:]
		}
		for _, r := range rs.rules {
			if r.match(sub, isDir) {
				ignored = !r.negate
			}
		}
	}
	return ignored
}

// maxIgnoreFile bounds the ignore files read; a larger one is skipped.
const maxIgnoreFile = 1 << 20

// FS is the directory tree a walk reads. The environment passes a handle
// that cannot be left (workspace.Tree), so a walk never follows a link or a
// swapped directory out of the workspace.
type FS interface {
	// ReadDir lists a directory, given by its slash-separated name from
	// the tree's root ("." for the root), sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// ReadFile reads a regular file of at most limit bytes.
	ReadFile(name string, limit int64) ([]byte, error)
}

// with returns a matcher that also applies the ignore file of dir, if any.
func (m *Matcher) with(fsys FS, dir string) *Matcher {
	data, err := fsys.ReadFile(join(dir, ".gitignore"), maxIgnoreFile)
	if err != nil || len(data) == 0 {
		return m
	}
	sets := append(append([]ruleSet(nil), m.sets...), parseRules(dir, data, m.fold))
	return &Matcher{sets: sets, fold: m.fold}
}

// join appends name to the slash-separated directory dir ("" is the root).
func join(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}

// ErrStop ends a walk early without an error.
var ErrStop = errors.New("stop walking")

// Entry is one path found by Walk.
type Entry struct {
	// Rel is the slash-separated path from the tree's root.
	Rel string
	// Entry is the directory entry; symbolic links are not followed.
	Entry fs.DirEntry
}

// Walk visits, in lexical order, every path under start (a slash-separated
// directory name inside fsys, "." for its root) that git would not ignore,
// calling fn for files, symbolic links and directories alike (the start
// itself excluded). Ignore files from the root down to start apply. fn may
// return fs.SkipDir for a directory, or ErrStop to end the walk.
//
// A directory's ignore file is read only when its listing names one, and
// .git/info/exclude only when the root's names .git: most directories have
// neither, and looking for them was an open or a stat each, at every
// workspace checkpoint (a third of a small workspace's). The listing is
// read just before, so a file made or removed meanwhile is seen as it
// would have been by a look just before the listing.
func Walk(ctx context.Context, fsys FS, start string, fn func(Entry) error) error {
	return walk(ctx, fsys, start, foldCase, fn)
}

// walk is Walk, comparing names without case when fold is set.
func walk(ctx context.Context, fsys FS, start string, fold bool, fn func(Entry) error) error {
	m := &Matcher{fold: fold}
	rel := path.Clean(start)
	if rel == ".." || strings.HasPrefix(rel, "../") || path.IsAbs(rel) {
		return errors.New("the search path is outside the workspace")
	}
	if rel == "." {
		rel = ""
	}
	if rel != "" {
		// The directories above start are not listed: their ignore
		// files are looked for.
		m = m.withExclude(fsys).with(fsys, "")
		parts := strings.Split(rel, "/")
		for i := range parts {
			dir := strings.Join(parts[:i+1], "/")
			if m.Ignored(dir, true) || parts[i] == ".git" {
				return nil
			}
			if i < len(parts)-1 {
				m = m.with(fsys, dir)
			}
		}
	}
	err := walkDir(ctx, fsys, rel, m, fn)
	if errors.Is(err, ErrStop) {
		return nil
	}
	return err
}

// withExclude returns a matcher that also applies the repository's
// .git/info/exclude, if any.
func (m *Matcher) withExclude(fsys FS) *Matcher {
	data, err := fsys.ReadFile(".git/info/exclude", maxIgnoreFile)
	if err != nil || len(data) == 0 {
		return m
	}
	sets := append(append([]ruleSet(nil), m.sets...), parseRules("", data, m.fold))
	return &Matcher{sets: sets, fold: m.fold}
}

// withListed returns a matcher that also applies the ignore files of dir
// that its listing, entries, names: for the root, .git/info/exclude first
// (git ranks it below every .gitignore), then .gitignore.
func (m *Matcher) withListed(fsys FS, dir string, entries []fs.DirEntry) *Matcher {
	var git, gitignore bool
	for _, e := range entries {
		git = git || (dir == "" && m.sameName(e.Name(), ".git"))
		gitignore = gitignore || m.sameName(e.Name(), ".gitignore")
	}
	if git {
		m = m.withExclude(fsys)
	}
	if gitignore {
		m = m.with(fsys, dir)
	}
	return m
}

// sameName reports whether a listed name is name, without case when the
// matcher folds it (a file system that ignores case opens .gitignore by
// any spelling).
func (m *Matcher) sameName(listed, name string) bool {
	if m.fold {
		return strings.EqualFold(listed, name)
	}
	return listed == name
}

func walkDir(ctx context.Context, fsys FS, dir string, m *Matcher, fn func(Entry) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := dir
	if name == "" {
		name = "."
	}
	entries, err := fsys.ReadDir(name)
	if err != nil {
		return nil // unreadable directories are skipped, as git does
	}
	m = m.withListed(fsys, dir, entries)
	for _, e := range entries {
		rel := join(dir, e.Name())
		isDir := e.IsDir()
		if isDir && e.Name() == ".git" {
			continue
		}
		if m.Ignored(rel, isDir) {
			continue
		}
		err := fn(Entry{Rel: rel, Entry: e})
		if isDir {
			if errors.Is(err, fs.SkipDir) {
				continue
			}
			if err != nil {
				return err
			}
			if err := walkDir(ctx, fsys, rel, m, fn); err != nil {
				return err
			}
			continue
		}
		if err != nil && !errors.Is(err, fs.SkipDir) {
			return err
		}
	}
	return nil
}
