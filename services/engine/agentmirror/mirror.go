// Package agentmirror keeps, on each engine replica, working copies of the
// agents the store holds: one directory per agent, laid out as the
// reference lays an agent state out (system_config.yaml, AGENTS.md,
// skills/, memory/, the vault), which the rest of the engine reads with
// package agentstate as it always has.
//
// The store is where an agent lives; a working copy is brought up to date
// at the start of every task ([Mirror.Sync]), so an edit made through any
// replica reaches the next task on every other, and no replica needs a
// volume shared with another. Changes made in a working copy (memory a
// model saved with the agent-file tools, or a person's edit of a file on a
// laptop) go the other way at the same moment: each file changed since the
// copy was last synced is written to the store on condition that the
// store's file has not changed meanwhile. When it has, the store's file is
// kept and the local one is dropped with a warning in the log: an edit
// through the API is never silently undone by a stale copy.
//
// A working copy records what it was synced from in a hidden file
// (.penguin-sync.json: the agent's version and each file's version and
// hash), so that a copy edited while the engine was stopped is still
// recognised as edited at the next start.
package agentmirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/penguin-agent/penguin/internal/dirstamp"
	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// DefaultProject is the project of every agent until projects are
// assigned by the caller's access; [Project] is the one place that says
// so.
const DefaultProject = "default"

// Project returns the project the engine's agents belong to.
func Project() string { return DefaultProject }

// syncFile is the hidden file in a working copy that records what it was
// synced from.
const syncFile = ".penguin-sync.json"

// projectsDir holds the working copies of projects other than the
// default one, under the mirror's root: <root>/.projects/<project>/<agent>.
const projectsDir = ".projects"

// Mirror keeps the working copies of the agents of a store under a root
// directory: <root>/<agent> for the default project.
type Mirror struct {
	store store.AgentStore
	root  string
	log   *slog.Logger

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	// clean holds, for each working copy whose last Sync found nothing to
	// write either way, the copy's stamp then and its sync record (see
	// Sync). Guarded by the copy's lock.
	clean map[string]cleanCopy
}

// cleanCopy is a working copy as its last Sync left it, unchanged.
type cleanCopy struct {
	stamp dirstamp.Stamp
	base  *syncState
}

// New returns a mirror of st's agents under root, which is created when
// missing.
func New(st store.AgentStore, root string, log *slog.Logger) (*Mirror, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("agent mirror: %w", err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("agent mirror: %w", err)
	}
	return &Mirror{store: st, root: abs, log: logger.OrDiscard(log), locks: map[string]*sync.Mutex{}, clean: map[string]cleanCopy{}}, nil
}

// Root returns the directory the working copies are kept under.
func (m *Mirror) Root() string { return m.root }

// Store returns the store the mirror copies from.
func (m *Mirror) Store() store.AgentStore { return m.store }

// Dir returns the working copy of an agent.
func (m *Mirror) Dir(project, agent string) string {
	if project == DefaultProject {
		return filepath.Join(m.root, agent)
	}
	return filepath.Join(m.root, projectsDir, project, agent)
}

// Resolve names the agent a session's agent reference stands for: a
// working copy's directory, or a bare agent name of the default project.
// ok is false for a directory outside the mirror, which the engine reads
// as it stands.
func (m *Mirror) Resolve(ref string) (project, agent string, ok bool) {
	if ref != "" && !strings.ContainsAny(ref, `/\`) && ValidName(ref) == nil {
		return DefaultProject, ref, true
	}
	if !filepath.IsAbs(ref) {
		return "", "", false
	}
	rel, err := filepath.Rel(m.root, filepath.Clean(ref))
	if err != nil {
		return "", "", false
	}
	parts := strings.Split(filepath.ToSlash(rel), "/")
	switch {
	case len(parts) == 1 && ValidName(parts[0]) == nil:
		return DefaultProject, parts[0], true
	case len(parts) == 3 && parts[0] == projectsDir && parts[1] != "" && ValidName(parts[2]) == nil:
		return parts[1], parts[2], true
	}
	return "", "", false
}

// copyKey names a working copy in the mirror's maps.
func copyKey(project, agent string) string { return project + "\x00" + agent }

// lock serialises syncs of one working copy within this process.
func (m *Mirror) lock(project, agent string) func() {
	key := copyKey(project, agent)
	m.mu.Lock()
	l := m.locks[key]
	if l == nil {
		l = &sync.Mutex{}
		m.locks[key] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// syncState is what a working copy was last synced from.
type syncState struct {
	Version int64                `json:"version"`
	Files   map[string]fileState `json:"files"`
}

type fileState struct {
	Version int64  `json:"version"`
	SHA256  string `json:"sha256"`
}

func hashOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Sync brings an agent's working copy up to date with the store, after
// writing to the store what changed in the copy since it was last synced,
// and returns the copy's directory. ErrNotFound (wrapped) for an agent the
// store does not hold.
//
// Sync runs at every session's creation and every run. A copy whose
// stamp (see package dirstamp), taken by a Sync that wrote nothing, still
// holds was not changed since: its files are not read and hashed again
// for changes to push, and its sync record is the one kept from then. The
// store is asked for the agent's version every time (SyncAt takes it
// from a read as fresh), which is how an edit through another replica is
// seen.
func (m *Mirror) Sync(ctx context.Context, project, agent string) (string, error) {
	dir, _, err := m.SyncHeld(ctx, project, agent)
	return dir, err
}

// SyncHeld is Sync, also returning the copy's stamp when Sync leaves the
// copy as it found it and the stamp can be trusted (zero otherwise): the
// stamp held a moment ago, which agentstate.LoadHeld takes instead of
// checking it again.
func (m *Mirror) SyncHeld(ctx context.Context, project, agent string) (string, dirstamp.Stamp, error) {
	return m.sync(ctx, project, agent, nil)
}

// SyncAt is SyncHeld with the agent's version as the store gave it a
// moment ago (zero: the store held no such agent), read with what the
// caller starts from (a task's row, store.LeaseRead): the store is not
// asked for it again, and an edit made before that read holds. A copy
// with changes of its own to write asks again once they are written, as
// SyncHeld does.
func (m *Mirror) SyncAt(ctx context.Context, project, agent string, version int64) (string, dirstamp.Stamp, error) {
	return m.sync(ctx, project, agent, &version)
}

// sync is SyncHeld, taking the agent's version from known when it is
// given and no change of the copy was written since it was read.
func (m *Mirror) sync(ctx context.Context, project, agent string, known *int64) (string, dirstamp.Stamp, error) {
	key := copyKey(project, agent)
	defer m.lock(project, agent)()
	dir := m.Dir(project, agent)
	var base *syncState
	pushed := false
	// The entry is put back only by a Sync that ends with the copy as it
	// found it.
	c, ok := m.clean[key]
	delete(m.clean, key)
	stamp, trusted := c.stamp, true
	if ok && c.stamp.Holds(dir) {
		base = c.base
	} else {
		// The stamp is taken before the copy is read: a change made
		// while it is read makes it not hold.
		stamp, trusted = dirstamp.Take(dir)
		var err error
		if base, err = readSyncState(dir); err != nil {
			return "", dirstamp.Stamp{}, err
		}
		if base != nil {
			if pushed, err = m.push(ctx, project, agent, dir, base); err != nil {
				return "", dirstamp.Stamp{}, err
			}
		}
	}
	var (
		a   store.Agent
		err error
	)
	switch {
	case known == nil || pushed:
		a, err = m.store.GetAgent(ctx, project, agent)
	case *known == 0:
		err = fmt.Errorf("agent mirror: %w: agent %s of project %s", store.ErrNotFound, agent, project)
	default:
		a = store.Agent{Project: project, Name: agent, Version: *known}
	}
	if errors.Is(err, store.ErrNotFound) && base != nil {
		// The agent was deleted through another replica: its copy here
		// goes too, so that nothing runs on a stale one.
		if rerr := os.RemoveAll(dir); rerr != nil {
			return "", dirstamp.Stamp{}, fmt.Errorf("agent mirror: %w", rerr)
		}
	}
	if err != nil {
		return "", dirstamp.Stamp{}, err
	}
	if base != nil && a.Version == base.Version {
		if trusted && !pushed {
			m.clean[key] = cleanCopy{stamp: stamp, base: base}
			return dir, stamp, nil
		}
		return dir, dirstamp.Stamp{}, nil
	}
	a, files, err := m.store.ReadAgent(ctx, project, agent)
	if err != nil {
		return "", dirstamp.Stamp{}, err
	}
	if err := writeCopy(dir, a, files); err != nil {
		return "", dirstamp.Stamp{}, err
	}
	return dir, dirstamp.Stamp{}, nil
}

// push writes the copy's changes since base to the store and records
// them in base, and reports whether there were any. A change whose file
// changed in the store meanwhile is dropped (the store's file wins, the
// next pull writes it), with a warning.
func (m *Mirror) push(ctx context.Context, project, agent, dir string, base *syncState) (bool, error) {
	local, err := scan(dir)
	if err != nil {
		return false, err
	}
	var changes []store.AgentChange
	for p, data := range local {
		if was, ok := base.Files[p]; !ok || was.SHA256 != hashOf(data) {
			cond := store.Absent
			if ok {
				cond = was.Version
			}
			changes = append(changes, store.AgentChange{Path: p, Data: data, IfVersion: cond})
		}
	}
	for p, was := range base.Files {
		if _, ok := local[p]; !ok {
			changes = append(changes, store.AgentChange{Path: p, Delete: true, IfVersion: was.Version})
		}
	}
	if len(changes) == 0 {
		return false, nil
	}
	for len(changes) > 0 {
		a, err := m.store.ChangeAgent(ctx, project, agent, changes)
		if err == nil {
			// Our change is the agent's newest: the copy now holds these
			// files at that version. Whether other changes came before
			// it, the pull that follows finds out from the agent's
			// version.
			for _, c := range changes {
				if c.Delete {
					delete(base.Files, c.Path)
				} else {
					base.Files[c.Path] = fileState{Version: a.Version, SHA256: hashOf(c.Data)}
				}
			}
			if base.Version == a.Version-1 {
				base.Version = a.Version
			}
			return true, writeSyncState(dir, base)
		}
		var conflicts []*store.AgentConflict
		for e := range allConflicts(err) {
			conflicts = append(conflicts, e)
		}
		if len(conflicts) == 0 {
			if errors.Is(err, store.ErrNotFound) {
				return true, nil // the agent was deleted: nothing to keep it in
			}
			return false, err
		}
		for _, c := range conflicts {
			m.log.Warn("a change of an agent's working copy lost to a newer change in the store; the store's file is kept",
				"project", project, "agent", agent, "file", c.Path)
			for i := range changes {
				if changes[i].Path == c.Path {
					changes = append(changes[:i], changes[i+1:]...)
					break
				}
			}
		}
		// The pull will replace these files with the store's.
		base.Version = -1
	}
	return true, nil
}

// allConflicts yields every *store.AgentConflict joined into err.
func allConflicts(err error) func(func(*store.AgentConflict) bool) {
	return func(yield func(*store.AgentConflict) bool) {
		var walk func(error) bool
		walk = func(e error) bool {
			if c, ok := e.(*store.AgentConflict); ok {
				return yield(c)
			}
			switch u := e.(type) {
			case interface{ Unwrap() []error }:
				for _, x := range u.Unwrap() {
					if !walk(x) {
						return false
					}
				}
			case interface{ Unwrap() error }:
				if x := u.Unwrap(); x != nil {
					return walk(x)
				}
			}
			return true
		}
		walk(err)
	}
}

// readSyncState reads a copy's sync record; nil when the copy was never
// synced.
func readSyncState(dir string) (*syncState, error) {
	data, err := os.ReadFile(filepath.Join(dir, syncFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent mirror: %w", err)
	}
	var s syncState
	if err := json.Unmarshal(data, &s); err != nil || s.Files == nil {
		// A damaged record: the store's files replace the copy.
		return nil, nil
	}
	return &s, nil
}

func writeSyncState(dir string, s *syncState) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("agent mirror: %w", err)
	}
	return writeFile(dir, syncFile, data)
}

// scan reads every file of a working copy but its sync record and the
// temporary files of a write in progress.
func scan(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) && p == dir {
				return fs.SkipAll
			}
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if !d.Type().IsRegular() || rel == syncFile || isTemporary(path.Base(rel)) {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files[rel] = data
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("agent mirror: scan %s: %w", dir, err)
	}
	return files, nil
}

// isTemporary reports whether name is a file being written atomically
// (".NAME.tmp-RANDOM", as package agentstate and this one write them).
func isTemporary(name string) bool {
	return strings.HasPrefix(name, ".") && strings.Contains(name, ".tmp-")
}

// writeCopy makes dir hold exactly the store's files at a's version, and
// records them. A file already equal is left alone; a file the store
// lacks is removed.
func writeCopy(dir string, a store.Agent, files []store.AgentFile) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agent mirror: %w", err)
	}
	local, err := scan(dir)
	if err != nil {
		return err
	}
	st := &syncState{Version: a.Version, Files: map[string]fileState{}}
	for _, f := range files {
		if err := CheckPath(f.Path); err != nil {
			return fmt.Errorf("agent mirror: the store's agent %s holds %w", a.Name, err)
		}
		st.Files[f.Path] = fileState{Version: f.Version, SHA256: hashOf(f.Data)}
		if old, ok := local[f.Path]; ok && string(old) == string(f.Data) {
			delete(local, f.Path)
			continue
		}
		delete(local, f.Path)
		if err := writeFile(dir, f.Path, f.Data); err != nil {
			return err
		}
	}
	for p := range local {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(p))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("agent mirror: %w", err)
		}
	}
	return writeSyncState(dir, st)
}

// writeFile writes a file of a working copy atomically (a temporary file
// renamed into place), with mode 0600 for a vault.
func writeFile(dir, rel string, data []byte) error {
	p := filepath.Join(dir, filepath.FromSlash(rel))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("agent mirror: %w", err)
	}
	perm := os.FileMode(0o644)
	if IsVault(rel) || rel == syncFile {
		perm = 0o600
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return fmt.Errorf("agent mirror: %w", err)
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, p)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("agent mirror: write %s: %w", p, err)
	}
	return nil
}
