package environment

import "sync"

// maxUnchanged bounds the workspaces whose last checkpoint is kept for
// reuse; past it a checkpoint walks as before.
const maxUnchanged = 4096

// writeTracker knows when nothing this service runs can have written to
// a workspace since its last checkpoint. A checkpoint asked to follow
// that one (CheckpointWorkspaceRequest.since: a turn's end, following its
// start) is then that one again, and the walk of the workspace (its
// handles, directories, a stat of every file, the store's head) is not
// made: a turn whose model only read (read_file, glob, grep, read_image)
// cannot have changed the files, and its end checkpoint was, before, a
// walk that found what its start had found.
//
// What may write is everything but those builtin tools: any other tool's
// call while it runs (commands, file writes, custom and MCP tools, a
// builtin whatever permission the configuration declares for it), an
// environment whose commands or MCP servers were started (a background
// process may write at any time) until it is disposed, a restore, a
// CreateEnvironment that makes the workspace's directories. These count
// for every workspace of the service, since one environment's workspace
// may lie inside another's. A person or a process outside the service
// that edits the workspace during such a turn is not seen by its end
// checkpoint: the turn, whose tools only read, is not given that change.
// A checkpoint that follows none (a turn's start) always walks, so an
// edit made between turns is never taken for the next turn's.
type writeTracker struct {
	mu sync.Mutex
	// gen moves whenever something that may write starts or ends.
	gen uint64
	// active counts what may write that runs now.
	active int
	// last is, by resolved workspace path, the checkpoint taken with
	// nothing written since; emptied whenever gen moves.
	last map[string]lastCheckpoint
}

// lastCheckpoint is a workspace's checkpoint as CheckpointWorkspace
// answered it.
type lastCheckpoint struct {
	id, incomplete string
}

// begin registers something that may write, until the function returned
// is called (once; later calls do nothing).
func (w *writeTracker) begin() (end func()) {
	w.mu.Lock()
	w.moveLocked(1)
	w.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			w.moveLocked(-1)
			w.mu.Unlock()
		})
	}
}

// moveLocked counts what may write up or down by delta and forgets every
// last checkpoint; w.mu must be held.
func (w *writeTracker) moveLocked(delta int) {
	w.gen++
	w.active += delta
	clear(w.last)
}

// unchanged returns the last checkpoint of the workspace dir when nothing
// that may write ran since it was taken, nor runs now.
func (w *writeTracker) unchanged(dir string) (lastCheckpoint, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	l, ok := w.last[dir]
	return l, ok && w.active == 0
}

// mark is taken before a checkpoint's walk, for record: the generation,
// and whether nothing that may write runs.
func (w *writeTracker) mark() (gen uint64, quiet bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.gen, w.active == 0
}

// record keeps l as the workspace dir's last checkpoint, whose walk
// started at mark's gen and quiet: only when nothing that may write ran
// from before the walk until now, so that the walk saw every write.
func (w *writeTracker) record(dir string, gen uint64, quiet bool, l lastCheckpoint) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !quiet || gen != w.gen || w.active != 0 {
		return
	}
	if w.last == nil {
		w.last = map[string]lastCheckpoint{}
	}
	if _, ok := w.last[dir]; ok || len(w.last) < maxUnchanged {
		w.last[dir] = l
	}
}
