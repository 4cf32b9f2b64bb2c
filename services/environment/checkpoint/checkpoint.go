// Package checkpoint keeps content-addressed snapshots of a workspace, so
// that what a turn changed can be listed, shown as a diff, undone and
// redone, whatever changed it: a file tool or a command.
//
// A checkpoint is a manifest of every path git would not ignore (.git
// itself excluded): files with the SHA-256 of their content, symbolic
// links with their target, directories. Contents are stored once per
// hash, so a checkpoint of an unchanged workspace costs nothing but the
// walk, and a file whose size and modification time match the previous
// checkpoint's is not even read again. Manifests are named by the hash of
// their own text: the same files give the same id.
//
// Shadow git commits (codex's ghost commits) would need git on every host
// and a repository beside each workspace; this needs neither, walks the
// workspace with the same ignore rules as the file tools, and reads and
// writes through the workspace's handle, which no link leads out of.
package checkpoint

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/penguin-agent/penguin/internal/dirstamp"
	"github.com/penguin-agent/penguin/services/environment/ignore"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// Limits bound what one checkpoint records.
type Limits struct {
	// MaxEntries bounds the files, links and directories recorded; past
	// it the checkpoint is incomplete.
	MaxEntries int
	// MaxBytes bounds the total size of the files whose content is kept;
	// past it the checkpoint is incomplete.
	MaxBytes int64
	// MaxFileBytes is the largest file whose content is kept; a larger
	// one is recorded by its size and time only, so that its change is
	// seen but cannot be undone.
	MaxFileBytes int64
}

// DefaultLimits are the limits a service uses unless told otherwise: room
// for a large source tree, not for a tree of build outputs that its
// .gitignore forgot.
var DefaultLimits = Limits{MaxEntries: 20_000, MaxBytes: 256 << 20, MaxFileBytes: 8 << 20}

// Entry kinds.
const (
	kindFile = "f"
	kindLink = "l"
	kindDir  = "d"
	// kindOther is what is none of those (a pipe, a socket, a device):
	// never recorded, and never restored over.
	kindOther = "other"
)

// Entry is one path of a checkpoint.
type Entry struct {
	Kind   string `json:"k"`
	Hash   string `json:"h,omitempty"` // a file's content, when kept
	Size   int64  `json:"s,omitempty"`
	Exec   bool   `json:"x,omitempty"` // a file's executable bit
	MTime  int64  `json:"t,omitempty"` // nanoseconds, for the cache and large files
	Large  bool   `json:"l,omitempty"` // content not kept
	Target string `json:"target,omitempty"`
}

// same reports whether two entries describe the same content (a missing
// entry is nil).
func same(a, b *Entry) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.Kind != b.Kind {
		return false
	}
	switch a.Kind {
	case kindLink:
		return a.Target == b.Target
	case kindFile:
		if a.Large || b.Large {
			return a.Large == b.Large && a.Size == b.Size && a.MTime == b.MTime
		}
		return a.Hash == b.Hash && a.Exec == b.Exec
	}
	return true
}

// Manifest is one checkpoint.
type Manifest struct {
	Entries map[string]*Entry `json:"entries"`
	// Incomplete says why the checkpoint stops short of the whole
	// workspace; empty when it does not.
	Incomplete string `json:"incomplete,omitempty"`
}

// Store is the checkpoints of one workspace.
type Store struct {
	root *os.Root
	// added counts the bytes this handle wrote to the store, which
	// Collect adds to the usage it last recorded.
	added int64
	// intact is set when Open (or Reusable) found the store's
	// directories in place. A store that had lost one (a scratch area
	// cleared in part) trusts no manifest kept in memory to have its
	// files on disk.
	intact bool
	// checked is the stamp of the store's directory when Reusable last
	// found its directories in place; zero when none was trusted.
	checked dirstamp.File
}

// Open opens (creating it if needed) the store of the workspace dir inside
// parent, a directory that commands cannot write.
func Open(parent *os.Root, dir string) (*Store, error) {
	sum := sha256.Sum256([]byte(dir))
	name := "workspace-checkpoints/" + hex.EncodeToString(sum[:12])
	// The store is opened at every checkpoint: one that has its
	// directories is opened without making them again (MkdirAll walks
	// the whole path, twice).
	if r, err := parent.OpenRoot(name); err == nil {
		if hasStoreDirs(r) {
			return &Store{root: r, intact: true}, nil
		}
		r.Close()
	}
	for _, sub := range storeDirs {
		if err := parent.MkdirAll(name+"/"+sub, 0o700); err != nil {
			return nil, fmt.Errorf("checkpoint store: %w", err)
		}
	}
	r, err := parent.OpenRoot(name)
	if err != nil {
		return nil, fmt.Errorf("checkpoint store: %w", err)
	}
	return &Store{root: r}, nil
}

// storeDirs are the directories of a store.
var storeDirs = []string{"objects", "manifests"}

// hasStoreDirs reports whether the store r has its directories.
func hasStoreDirs(r *os.Root) bool {
	for _, sub := range storeDirs {
		if info, err := r.Lstat(sub); err != nil || !info.IsDir() {
			return false
		}
	}
	return true
}

// Close releases the store.
func (s *Store) Close() error { return s.root.Close() }

// Reusable reports whether the store, opened for an earlier checkpoint
// and kept open since, may serve another as it is, or must be opened
// again (Open makes what is missing). A store's directory whose stamp
// (see package dirstamp: lstat's size, times and inode) is the one it had
// when its directories were last found in place still has them: removing
// or renaming one of them, or the directory itself, moves its times. That
// is one lstat instead of the seven system calls of Open and Close; a
// stamp that moved, or that cannot be trusted yet, has the directories
// looked at again, as Open does.
func (s *Store) Reusable(now time.Time) bool {
	info, err := s.root.Lstat(".")
	if err != nil {
		return false
	}
	stamp, trusted := dirstamp.StampFile(info, now)
	if trusted && stamp == s.checked {
		return true
	}
	if !hasStoreDirs(s.root) {
		return false
	}
	// As a store opened now would be: its directories are in place.
	s.intact = true
	s.checked = dirstamp.File{}
	if trusted {
		s.checked = stamp
	}
	return true
}

// ErrUnknown is wrapped when a checkpoint id names no checkpoint.
var ErrUnknown = errors.New("no such checkpoint")

// ErrCannotRestore is wrapped when a restore cannot be done whole: the
// target lacks a file's content.
var ErrCannotRestore = errors.New("cannot be restored")

// ConflictError is a restore's refusal of files that changed since.
type ConflictError struct{ Paths []string }

func (e *ConflictError) Error() string {
	return fmt.Sprintf("%d file(s) changed since: %s; nothing was restored (force overwrites them)", len(e.Paths), strings.Join(e.Paths, ", "))
}

var idPattern = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[0-9a-f]{64}$`) })

// Snapshot records the workspace tree as a checkpoint and returns its id.
// The Manifest returned is shared: it must not be changed.
func (s *Store) Snapshot(ctx context.Context, tree *workspace.Tree, lim Limits) (string, *Manifest, error) {
	head, headStamp := s.head()
	kept := lastManifests.get(s.root.Name(), head)
	if !s.intact {
		kept = keptManifest{}
	}
	prev := kept.m
	if prev == nil {
		prev, _ = s.Load(head)
	}
	start := time.Now()
	m := &Manifest{Entries: map[string]*Entry{}}
	var total int64
	err := ignore.Walk(ctx, tree, ".", func(e ignore.Entry) error {
		if len(m.Entries) >= lim.MaxEntries {
			m.Incomplete = fmt.Sprintf("the workspace has more than %d files and directories that git does not ignore", lim.MaxEntries)
			return ignore.ErrStop
		}
		ent, err := s.record(tree, e, prev, kept.m != nil, start, lim)
		if err != nil || ent == nil {
			return nil // vanished meanwhile, or not a file: left out
		}
		if ent.Kind == kindFile && !ent.Large {
			total += ent.Size
			if total > lim.MaxBytes {
				m.Incomplete = fmt.Sprintf("the workspace's files that git does not ignore hold more than %d bytes", lim.MaxBytes)
				return ignore.ErrStop
			}
		}
		m.Entries[e.Rel] = ent
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	var text []byte
	id := kept.id
	if kept.m == nil || !sameManifest(m, kept.m) {
		if text, id, err = manifestText(m); err != nil {
			return "", nil, err
		}
	}
	touched := kept.touched
	if now := time.Now(); id != head || kept.m == nil || now.Sub(touched) >= touchEvery {
		// The head kept in memory, touched a moment ago, is on disk as
		// it was: the store and its files are only written when that
		// changes.
		if text == nil {
			if text, _, err = manifestText(m); err != nil {
				return "", nil, err
			}
		}
		if err := s.save(id, text, now); err != nil {
			return "", nil, err
		}
		touched = now
	}
	e := keptManifest{id: id, m: m, touched: touched}
	if id == head {
		// A head written anew is stamped when it is next read.
		e.head = headStamp
	}
	lastManifests.put(s.root.Name(), e)
	if id != head {
		// A workspace as the last checkpoint found it (most turns of a
		// session that reads) leaves the head as it is.
		_ = s.root.WriteFile("head", []byte(id), 0o600)
	}
	return id, m, nil
}

// sameManifest reports whether a and b record the same entries, and so
// have the same text and id: a workspace found as the kept checkpoint
// recorded it is not encoded and hashed again to learn its id.
func sameManifest(a, b *Manifest) bool {
	if a.Incomplete != b.Incomplete || len(a.Entries) != len(b.Entries) {
		return false
	}
	for name, e := range a.Entries {
		if o, ok := b.Entries[name]; !ok || *o != *e {
			return false
		}
	}
	return true
}

// touchEvery is how stale the modification time of the head's manifest
// may grow while checkpoints of an unchanged workspace find it again:
// collection orders checkpoints by that time and ages them from it (by
// the day), and a turn that only read would otherwise write it twice.
const touchEvery = time.Minute

// lastManifests keeps, for each store, the newest checkpoint Snapshot
// made, so that the next Snapshot compares the workspace with it without
// reading and decompressing its file again (that was most of the
// checkpoint of an unchanged workspace, taken at every turn). A
// manifest's id is the hash of its text, so a kept one is what the file
// holds whoever wrote it; which checkpoint is the head is still read from
// the store every time, since another process may have moved it. A kept
// manifest's contents were stored or found in the store when it was
// made, and collection keeps the newest checkpoint's: while it is the
// head, an unchanged file's content is not looked for again. Bounded
// to maxKeptEntries entries in all: a workspace too large for it is read
// from its file, as before.
var lastManifests = &keptManifests{m: map[string]keptManifest{}}

// maxKeptEntries bounds the entries of the manifests kept in memory, some
// 10 MiB at most.
const maxKeptEntries = 1 << 16

type keptManifest struct {
	id string
	m  *Manifest
	// touched is when this process last set the manifest file's
	// modification time (or wrote it).
	touched time.Time
	// head is the stamp of the store's head file when it last read id
	// there; zero when unknown.
	head dirstamp.File
	// listed is when Collect last listed the store and found it within
	// the retention within (zero when it did not).
	listed time.Time
	within Retention
}

type keptManifests struct {
	mu      sync.Mutex
	m       map[string]keptManifest // by the store's directory
	entries int                     // in all the manifests kept
}

// get returns what is kept of the store at dir if its manifest is id,
// else a keptManifest without a manifest.
func (k *keptManifests) get(dir, id string) keptManifest {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m[dir]; ok && e.id == id {
		return e
	}
	return keptManifest{}
}

// put keeps e, the last checkpoint of the store at dir, in place of the
// store's last one, making room by dropping other stores' if need be.
func (k *keptManifests) put(dir string, e keptManifest) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if old, ok := k.m[dir]; ok {
		k.entries -= len(old.m.Entries)
		delete(k.m, dir)
		e.listed, e.within = old.listed, old.within
	}
	if len(e.m.Entries) > maxKeptEntries {
		return
	}
	for other, x := range k.m {
		if k.entries+len(e.m.Entries) <= maxKeptEntries {
			break
		}
		k.entries -= len(x.m.Entries)
		delete(k.m, other)
	}
	k.m[dir] = e
	k.entries += len(e.m.Entries)
}

// headOf returns the id kept for the store at dir when its head file is
// still as stamp says it was when that id was read from it.
func (k *keptManifests) headOf(dir string, stamp dirstamp.File) (string, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m[dir]; ok && e.head != (dirstamp.File{}) && e.head == stamp {
		return e.id, true
	}
	return "", false
}

// listedAt returns when Collect last found the store at dir within r;
// zero when it is not known.
func (k *keptManifests) listedAt(dir string, r Retention) time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.m[dir]; e.within == r {
		return e.listed
	}
	return time.Time{}
}

// setListed records that Collect found the store at dir within r at t
// (zero: it did not), for a store whose checkpoint is kept.
func (k *keptManifests) setListed(dir string, r Retention, t time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if e, ok := k.m[dir]; ok {
		e.listed, e.within = t, r
		k.m[dir] = e
	}
}

// record describes the path the walk found as it is now, storing a
// file's content; nil for a path that is neither a file, a link nor a
// directory. trusted says that prev's contents are known to be stored
// (see lastManifests).
func (s *Store) record(tree *workspace.Tree, w ignore.Entry, prev *Manifest, trusted bool, start time.Time, lim Limits) (*Entry, error) {
	name := w.Rel
	// A directory read through the workspace's handle describes its
	// entries as it reads them (lstat beside the directory's handle), so
	// the walk's description is as fresh as another lstat would be.
	info, err := w.Entry.Info()
	if err != nil {
		return nil, err
	}
	e, err := describeInfo(tree, name, info, lim, func(e *Entry) error {
		// A file whose size and time are those of the last checkpoint is
		// not read again, unless its time is so recent that a write in
		// the same clock tick could have left both unchanged.
		if prev != nil && time.Unix(0, e.MTime).Before(start.Add(-2*time.Second)) {
			if p := prev.Entries[name]; p != nil && p.Kind == kindFile && !p.Large && p.Size == e.Size && p.MTime == e.MTime && p.Exec == e.Exec && (trusted || s.has(p.Hash)) {
				e.Hash = p.Hash
				return nil
			}
		}
		data, err := tree.ReadFile(name, lim.MaxFileBytes)
		if err != nil {
			return err
		}
		e.Size = int64(len(data))
		e.Hash, err = s.put(data)
		return err
	})
	if err != nil || e.Kind == kindOther {
		return nil, err
	}
	return e, nil
}

// describe describes name as it is now; content fills in the hash of a
// file whose content is kept.
func describe(tree *workspace.Tree, name string, lim Limits, content func(*Entry) error) (*Entry, error) {
	info, err := tree.Lstat(name)
	if err != nil {
		return nil, err
	}
	return describeInfo(tree, name, info, lim, content)
}

// describeInfo is describe, with what lstat says of name.
func describeInfo(tree *workspace.Tree, name string, info fs.FileInfo, lim Limits, content func(*Entry) error) (*Entry, error) {
	switch mode := info.Mode(); {
	case mode.IsDir():
		return &Entry{Kind: kindDir}, nil
	case mode&fs.ModeSymlink != 0:
		target, err := tree.Readlink(name)
		return &Entry{Kind: kindLink, Target: target}, err
	case !mode.IsRegular():
		return &Entry{Kind: kindOther}, nil
	}
	e := &Entry{Kind: kindFile, Size: info.Size(), Exec: info.Mode().Perm()&0o100 != 0, MTime: info.ModTime().UnixNano()}
	if e.Size > lim.MaxFileBytes {
		e.Large = true
		return e, nil
	}
	return e, content(e)
}

// head is the id of the store's last checkpoint, "" when none, and the
// stamp of the head file it was read from (zero when the stamp cannot be
// trusted). A head file as it was when the checkpoint kept in memory was
// read from it (see package dirstamp: lstat's size, times and inode) is
// not read again: one lstat instead of an open, reads and a close at
// every checkpoint.
func (s *Store) head() (string, dirstamp.File) {
	info, err := s.root.Lstat("head")
	if err != nil {
		return "", dirstamp.File{}
	}
	// The stamp is taken before the file is read: a write meanwhile
	// makes it not match at the next checkpoint.
	stamp, trusted := dirstamp.StampFile(info, time.Now())
	if !trusted || !s.intact {
		stamp = dirstamp.File{}
	} else if id, ok := lastManifests.headOf(s.root.Name(), stamp); ok {
		return id, stamp
	}
	b, _ := s.root.ReadFile("head")
	return strings.TrimSpace(string(b)), stamp
}

func objectName(hash string) string { return "objects/" + hash[:2] + "/" + hash[2:] }

// has reports whether the content hash is stored.
func (s *Store) has(hash string) bool {
	if !idPattern().MatchString(hash) {
		return false
	}
	_, err := s.root.Stat(objectName(hash))
	return err == nil
}

// put stores data under its hash.
func (s *Store) put(data []byte) (string, error) {
	sum := sha256.Sum256(data)
	hash := hex.EncodeToString(sum[:])
	if s.has(hash) {
		return hash, nil
	}
	if err := s.write(objectName(hash), data); err != nil {
		return "", err
	}
	s.added += int64(len(data))
	return hash, nil
}

// write writes a file of the store whole, or not at all.
func (s *Store) write(name string, data []byte) error {
	if err := s.root.MkdirAll(path.Dir(name), 0o700); err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", name, time.Now().UnixNano())
	if err := s.root.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	if err := s.root.Rename(tmp, name); err != nil {
		_ = s.root.Remove(tmp)
		return err
	}
	return nil
}

// Content returns a file's stored content.
func (s *Store) Content(hash string) ([]byte, error) {
	if !idPattern().MatchString(hash) {
		return nil, fmt.Errorf("%w: content %q", ErrUnknown, hash)
	}
	return s.root.ReadFile(objectName(hash))
}

// manifestText returns a manifest's text and its id, the text's hash.
func manifestText(m *Manifest) ([]byte, string, error) {
	text, err := json.Marshal(m) // map keys are sorted: the same files give the same text
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(text)
	return text, hex.EncodeToString(sum[:]), nil
}

// save stores the manifest text, whose id is id, as taken at now.
func (s *Store) save(id string, text []byte, now time.Time) error {
	name := manifestName(id)
	if _, err := s.root.Stat(name); err == nil {
		// The same files again: the checkpoint is new as far as
		// collection goes, oldest first by modification time.
		return s.root.Chtimes(name, now, now)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(text)
	if err := zw.Close(); err != nil {
		return err
	}
	if err := s.write(name, buf.Bytes()); err != nil {
		return err
	}
	s.added += int64(buf.Len())
	return nil
}

func manifestName(id string) string { return "manifests/" + id + ".json.gz" }

// gzipReaders keeps Load's gzip readers: a new one allocates and clears
// its decompressor's 32 KiB window and tables, about 70 KiB, where a
// manifest is often a few hundred bytes. Loads run at every tool call that
// checkpoints the workspace, once per task in the task benchmark, where
// they were a tenth of the bytes the server allocated.
var gzipReaders sync.Pool

// Load reads the checkpoint id.
func (s *Store) Load(id string) (*Manifest, error) {
	if !idPattern().MatchString(id) {
		return nil, fmt.Errorf("%w: %q", ErrUnknown, id)
	}
	f, err := s.root.Open(manifestName(id))
	if errors.Is(err, fs.ErrNotExist) {
		if s.wasCollected(id) {
			return nil, fmt.Errorf("%w: %s", ErrCollected, id)
		}
		return nil, fmt.Errorf("%w: %s (the service's scratch area may have been cleared)", ErrUnknown, id)
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, _ := gzipReaders.Get().(*gzip.Reader)
	if zr == nil {
		zr, err = gzip.NewReader(f)
	} else {
		err = zr.Reset(f)
	}
	if err != nil {
		return nil, err
	}
	defer gzipReaders.Put(zr)
	var m Manifest
	if err := json.NewDecoder(io.LimitReader(zr, 1<<30)).Decode(&m); err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", id, err)
	}
	return &m, nil
}

// Change is one path that differs between two checkpoints.
type Change struct {
	Path     string
	From, To *Entry // nil where the path is missing
}

// Changes lists the paths that differ from a to b, by path.
func Changes(a, b *Manifest) []Change {
	var out []Change
	for p, e := range a.Entries {
		if !same(e, b.Entries[p]) {
			out = append(out, Change{Path: p, From: e, To: b.Entries[p]})
		}
	}
	for p, e := range b.Entries {
		if a.Entries[p] == nil {
			out = append(out, Change{Path: p, To: e})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// IsDir reports whether the change is of a directory only (listed by
// no one, restored with the files).
func (c Change) IsDir() bool {
	return (c.From == nil || c.From.Kind == kindDir) && (c.To == nil || c.To.Kind == kindDir)
}

// Restore makes every path that differs from from to to what it is in
// to. It first checks that each is now what it is in from (or refuses
// with a ConflictError, unless force) and that to has every content it
// needs; only then does it change anything. It returns the paths that
// were overwritten though they had changed (force).
func (s *Store) Restore(tree *workspace.Tree, from, to *Manifest, force bool, lim Limits) ([]string, error) {
	if from.Incomplete != "" || to.Incomplete != "" {
		return nil, fmt.Errorf("%w: the checkpoint is incomplete: %s", ErrCannotRestore, from.Incomplete+to.Incomplete)
	}
	changes := Changes(from, to)
	var large, conflicts []string
	for _, c := range changes {
		if c.To != nil && c.To.Kind == kindFile && (c.To.Large || !s.has(c.To.Hash)) {
			large = append(large, c.Path)
		}
		if c.IsDir() {
			continue // a directory made or removed since loses nothing
		}
		now, err := s.current(tree, c.Path, lim)
		if err != nil {
			return nil, err
		}
		if !same(now, c.From) {
			conflicts = append(conflicts, c.Path)
		}
	}
	if len(large) > 0 {
		return nil, fmt.Errorf("%w: the content of %s was too large to keep (more than %d bytes), so it cannot be restored; nothing was changed",
			ErrCannotRestore, strings.Join(large, ", "), lim.MaxFileBytes)
	}
	if len(conflicts) > 0 && !force {
		return nil, &ConflictError{Paths: conflicts}
	}
	// Removals first, deepest first, so that a directory is empty when
	// its turn comes; then directories, files and links, top down.
	for i := len(changes) - 1; i >= 0; i-- {
		c := changes[i]
		if c.To == nil || (c.From != nil && c.From.Kind != c.To.Kind) {
			err := removeIfThere(tree, c.Path)
			if c.From != nil && c.From.Kind == kindDir && c.To == nil {
				// A directory that still holds what git ignores stays.
				continue
			}
			if err != nil {
				return conflicts, fmt.Errorf("removing %s: %w", c.Path, err)
			}
		}
	}
	for _, c := range changes {
		if c.To == nil {
			continue
		}
		if err := s.put1(tree, c.Path, c.To); err != nil {
			return conflicts, fmt.Errorf("restoring %s: %w", c.Path, err)
		}
	}
	return conflicts, nil
}

// removeIfThere removes name, which may be missing already.
func removeIfThere(tree *workspace.Tree, name string) error {
	err := tree.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// put1 makes name what e describes.
func (s *Store) put1(tree *workspace.Tree, name string, e *Entry) error {
	switch e.Kind {
	case kindDir:
		return tree.Mkdir(name)
	case kindLink:
		if err := removeIfThere(tree, name); err != nil {
			return err
		}
		return tree.Symlink(e.Target, name)
	}
	data, err := s.Content(e.Hash)
	if err != nil {
		return err
	}
	// A fresh file, never a write through what is there: it may be a
	// hard link to a file outside, or a link.
	if info, err := tree.Lstat(name); err == nil && !info.IsDir() {
		if err := tree.Remove(name); err != nil {
			return err
		}
	}
	f, _, _, err := tree.OpenWrite(name, true)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := workspace.Replace(f, data); err != nil {
		return err
	}
	mode := fs.FileMode(0o644)
	if e.Exec {
		mode = 0o755
	}
	return f.Chmod(mode)
}

// current describes name as it is now, without storing anything; nil when
// it is missing.
func (s *Store) current(tree *workspace.Tree, name string, lim Limits) (*Entry, error) {
	e, err := describe(tree, name, lim, func(e *Entry) error {
		data, err := tree.ReadFile(name, lim.MaxFileBytes)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		e.Hash = hex.EncodeToString(sum[:])
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil, nil
	}
	return e, err
}

// IsText reports whether content is shown as text: valid UTF-8 without a
// NUL byte.
func IsText(data []byte) bool {
	return bytes.IndexByte(data, 0) < 0 && utf8.Valid(data)
}
