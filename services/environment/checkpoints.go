package environment

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/textdiff"
	"github.com/penguin-agent/penguin/services/environment/checkpoint"
	"github.com/penguin-agent/penguin/services/environment/ignore"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// Bounds of what the workspace reads return.
const (
	// maxDiffEdits bounds the line edits a file's diff is computed for;
	// past it the file is listed with no diff.
	maxDiffEdits = 20_000
	// maxListEntries bounds one directory's listing.
	maxListEntries = 5_000
	// maxReadBytes bounds the file ReadWorkspaceFile returns.
	maxReadBytes = 1 << 20
)

// openStore returns the checkpoint store of the workspace real, resolved
// by existingWorkspace, whose handle is at dir: the one kept open for it
// (see heldStores) when it is still as it was, else the store opened. The
// caller gives it back with s.stores.put, under checkpointMu.
func (s *Service) openStore(real, dir string) (*checkpoint.Store, error) {
	if st := s.stores.take(real); st != nil {
		if st.Reusable(time.Now()) {
			return st, nil
		}
		st.Close()
	}
	st, err := openCheckpointStore(s.scratch, dir)
	if err != nil {
		s.log.Error("opening a checkpoint store failed", "workspace", dir, "error", err)
		return nil, status.Error(codes.Internal, "the checkpoint store cannot be opened; see the service log")
	}
	return st, nil
}

// openCheckpointStore is checkpoint.Open, which a test counts.
var openCheckpointStore = checkpoint.Open

// existingWorkspace resolves an existing workspace directory, with the
// checks of realWorkspace.
func (s *Service) existingWorkspace(requested string) (string, error) {
	p, err := s.workspacePath(requested)
	if err != nil {
		return "", toStatus(err)
	}
	real, err := s.realWorkspace(requested, p)
	if err != nil {
		// Only a workspace that cannot be resolved is looked up again,
		// to tell a missing one (most calls find theirs).
		if _, serr := os.Stat(p); errors.Is(serr, fs.ErrNotExist) {
			return "", status.Errorf(codes.NotFound, "workspace %q does not exist", requested)
		}
		return "", toStatus(err)
	}
	return real, nil
}

// openWorkspace opens an existing workspace directory as a handle.
func (s *Service) openWorkspace(requested string) (*workspace.Root, error) {
	real, err := s.existingWorkspace(requested)
	if err != nil {
		return nil, err
	}
	return openResolved(real)
}

// openResolved opens the workspace real, resolved by existingWorkspace,
// as a handle.
func openResolved(real string) (*workspace.Root, error) {
	root, err := workspace.NewResolved(real)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%v", err)
	}
	return root, nil
}

// loadPair reads the checkpoints from and to of a store.
func (s *Service) loadPair(st *checkpoint.Store, from, to string) (*checkpoint.Manifest, *checkpoint.Manifest, error) {
	a, err := st.Load(from)
	if err != nil {
		return nil, nil, s.checkpointStatus(err)
	}
	b, err := st.Load(to)
	if err != nil {
		return nil, nil, s.checkpointStatus(err)
	}
	return a, b, nil
}

// checkpointStatus turns a checkpoint error into a status.
func (s *Service) checkpointStatus(err error) error {
	var conflict *checkpoint.ConflictError
	switch {
	case errors.As(err, &conflict), errors.Is(err, checkpoint.ErrCannotRestore):
		return status.Error(codes.FailedPrecondition, err.Error())
	case errors.Is(err, checkpoint.ErrCollected):
		return collectedStatus(s.opts.CheckpointRetention)
	case errors.Is(err, checkpoint.ErrUnknown):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	}
	s.log.Error("a checkpoint operation failed", "error", err)
	return status.Errorf(codes.Internal, "checkpoint: %v", err)
}

// collectedStatus is the status of a checkpoint that retention removed:
// what a person reads when they undo a turn too old.
func collectedStatus(r checkpoint.Retention) error {
	return status.Errorf(codes.FailedPrecondition, "its checkpoint was collected (this service keeps %s; see --checkpoint-keep, --checkpoint-max-size and --checkpoint-max-age), so undo and redo are no longer possible for it", r)
}

// collect applies the service's retention to a store after a checkpoint
// was taken. A failure costs disk, not the call: it is logged.
func (s *Service) collect(st *checkpoint.Store, dir string) {
	n, err := st.Collect(s.opts.CheckpointRetention, time.Now())
	if err != nil {
		s.log.Warn("collecting old checkpoints failed", "workspace", dir, "error", err)
	} else if n > 0 {
		s.log.Info("old checkpoints collected", "workspace", dir, "count", n, "retention", s.opts.CheckpointRetention.String())
	}
}

// CheckpointWorkspace implements penguinv1.EnvironmentServiceServer. The
// checkpoint the request follows (since) is the answer again, without a
// walk, when it is the workspace's last and nothing this service runs can
// have written to the workspace since (see writeTracker).
func (s *Service) CheckpointWorkspace(ctx context.Context, req *penguinv1.CheckpointWorkspaceRequest) (*penguinv1.CheckpointWorkspaceResponse, error) {
	real, err := s.existingWorkspace(req.GetWorkspace())
	if err != nil {
		return nil, err
	}
	if l, ok := s.writes.unchanged(real); ok && req.GetSince() != "" && l.id == req.GetSince() {
		return &penguinv1.CheckpointWorkspaceResponse{Checkpoint: l.id, Incomplete: l.incomplete}, nil
	}
	gen, quiet := s.writes.mark()
	var resp *penguinv1.CheckpointWorkspaceResponse
	err = s.withResolvedStore(real, func(root *workspace.Root, st *checkpoint.Store) error {
		id, m, err := st.Snapshot(ctx, root.Workspace(), s.opts.Checkpoints)
		if err != nil {
			return s.checkpointStatus(err)
		}
		s.collect(st, root.Dir())
		resp = &penguinv1.CheckpointWorkspaceResponse{Checkpoint: id, Incomplete: m.Incomplete}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.writes.record(real, gen, quiet, lastCheckpoint{id: resp.GetCheckpoint(), incomplete: resp.GetIncomplete()})
	return resp, nil
}

// withStore runs fn on the workspace requested and its checkpoint store,
// one at a time in this service, so that the checkpoints a restore takes
// around itself see no other call's writes to the stores.
func (s *Service) withStore(requested string, fn func(*workspace.Root, *checkpoint.Store) error) error {
	real, err := s.existingWorkspace(requested)
	if err != nil {
		return err
	}
	return s.withResolvedStore(real, fn)
}

// withResolvedStore is withStore on the workspace real, resolved by
// existingWorkspace.
func (s *Service) withResolvedStore(real string, fn func(*workspace.Root, *checkpoint.Store) error) error {
	root, err := openResolved(real)
	if err != nil {
		return err
	}
	defer root.Close()
	s.checkpointMu.Lock()
	defer s.checkpointMu.Unlock()
	st, err := s.openStore(real, root.Dir())
	if err != nil {
		return err
	}
	defer s.stores.put(real, st)
	return fn(root, st)
}

// DiffCheckpoints implements penguinv1.EnvironmentServiceServer. It holds
// the stores like a checkpoint does, so that no collection removes a
// content it is reading.
func (s *Service) DiffCheckpoints(_ context.Context, req *penguinv1.DiffCheckpointsRequest) (*penguinv1.DiffCheckpointsResponse, error) {
	var resp *penguinv1.DiffCheckpointsResponse
	err := s.withStore(req.GetWorkspace(), func(_ *workspace.Root, st *checkpoint.Store) error {
		from, to, err := s.loadPair(st, req.GetFrom(), req.GetTo())
		if err != nil {
			return err
		}
		changes := checkpoint.Changes(from, to)
		if only := req.GetPaths(); len(only) > 0 {
			changes = onlyPaths(changes, only)
		}
		resp = &penguinv1.DiffCheckpointsResponse{
			Files:      describeChanges(st, changes, req.GetWithDiff()),
			Incomplete: strings.TrimSpace(from.Incomplete + " " + to.Incomplete),
		}
		return nil
	})
	return resp, err
}

// onlyPaths keeps the changes of the paths named.
func onlyPaths(changes []checkpoint.Change, paths []string) []checkpoint.Change {
	want := make(map[string]bool, len(paths))
	for _, p := range paths {
		want[p] = true
	}
	var out []checkpoint.Change
	for _, c := range changes {
		if want[c.Path] {
			out = append(out, c)
		}
	}
	return out
}

// RestoreCheckpoint implements penguinv1.EnvironmentServiceServer. The
// checkpoints taken around the restore make it undoable in turn: what a
// forced restore overwrote is kept in the first.
func (s *Service) RestoreCheckpoint(ctx context.Context, req *penguinv1.RestoreCheckpointRequest) (*penguinv1.RestoreCheckpointResponse, error) {
	// It writes to the workspace (see writeTracker).
	defer s.writes.begin()()
	var resp *penguinv1.RestoreCheckpointResponse
	err := s.withStore(req.GetWorkspace(), func(root *workspace.Root, st *checkpoint.Store) error {
		from, to, err := s.loadPair(st, req.GetFrom(), req.GetTo())
		if err != nil {
			return err
		}
		tree := root.Workspace()
		beforeID, before, err := st.Snapshot(ctx, tree, s.opts.Checkpoints)
		if err != nil {
			return s.checkpointStatus(err)
		}
		if before.Incomplete != "" && req.GetForce() {
			// What the restore would overwrite could not all be kept.
			return status.Errorf(codes.FailedPrecondition, "the workspace cannot be checkpointed before the restore (%s), so a forced restore could lose files; nothing was restored", before.Incomplete)
		}
		overwritten, err := st.Restore(tree, from, to, req.GetForce(), s.opts.Checkpoints)
		if err != nil {
			return s.checkpointStatus(err)
		}
		afterID, after, err := st.Snapshot(ctx, tree, s.opts.Checkpoints)
		if err != nil {
			return s.checkpointStatus(err)
		}
		s.collect(st, root.Dir())
		s.log.Info("workspace restored", "workspace", root.Dir(), "from", req.GetFrom(), "to", req.GetTo(), "overwritten", len(overwritten))
		resp = &penguinv1.RestoreCheckpointResponse{
			Before: beforeID, After: afterID, Overwritten: overwritten,
			Files: describeChanges(st, checkpoint.Changes(before, after), false),
		}
		return nil
	})
	return resp, err
}

// describeChanges turns changes into FileChanges, directories left out,
// with line counts and, when asked, unified diffs.
func describeChanges(st *checkpoint.Store, changes []checkpoint.Change, withDiff bool) []*penguinv1.FileChange {
	var out []*penguinv1.FileChange
	for _, c := range changes {
		if c.IsDir() {
			continue
		}
		fc := &penguinv1.FileChange{Path: c.Path, Kind: penguinv1.FileChangeKind_FILE_CHANGE_KIND_MODIFIED}
		switch {
		case c.From == nil || c.From.Kind == "d":
			fc.Kind = penguinv1.FileChangeKind_FILE_CHANGE_KIND_ADDED
		case c.To == nil || c.To.Kind == "d":
			fc.Kind = penguinv1.FileChangeKind_FILE_CHANGE_KIND_DELETED
		}
		fc.Link = (c.From != nil && c.From.Kind == "l") || (c.To != nil && c.To.Kind == "l")
		before, okA, largeA := side(st, c.From)
		after, okB, largeB := side(st, c.To)
		fc.TooLarge = largeA || largeB
		if fc.TooLarge || !okA || !okB {
			fc.Binary = !fc.TooLarge
			out = append(out, fc)
			continue
		}
		ops, ok := textdiff.Diff(textdiff.Lines(before), textdiff.Lines(after), maxDiffEdits)
		if ok {
			added, removed := textdiff.Count(ops)
			fc.AddedLines, fc.RemovedLines = int32(added), int32(removed)
			if withDiff {
				fc.Diff = textdiff.Render(c.Path, textdiff.Hunks(ops, 3))
			}
		}
		out = append(out, fc)
	}
	return out
}

// side returns the text of one side of a change: "" for a missing path or
// a directory, the target for a link; ok is false for content that is not
// text, large for content that was not kept.
func side(st *checkpoint.Store, e *checkpoint.Entry) (text string, ok, large bool) {
	switch {
	case e == nil || e.Kind == "d":
		return "", true, false
	case e.Kind == "l":
		return e.Target + "\n", true, false
	case e.Large:
		return "", false, true
	}
	data, err := st.Content(e.Hash)
	if err != nil || !checkpoint.IsText(data) {
		return "", false, false
	}
	return string(data), true, false
}

// ListWorkspaceFiles implements penguinv1.EnvironmentServiceServer.
func (s *Service) ListWorkspaceFiles(ctx context.Context, req *penguinv1.ListWorkspaceFilesRequest) (*penguinv1.ListWorkspaceFilesResponse, error) {
	dir, err := cleanRel(req.GetDir())
	if err != nil {
		return nil, err
	}
	root, err := s.openWorkspace(req.GetWorkspace())
	if err != nil {
		return nil, err
	}
	defer root.Close()
	tree := root.Workspace()
	if info, err := tree.Stat(dir); err != nil || !info.IsDir() {
		return nil, status.Errorf(codes.NotFound, "%q is not a directory of the workspace", req.GetDir())
	}
	resp := &penguinv1.ListWorkspaceFilesResponse{}
	var dirs, files []*penguinv1.WorkspaceEntry
	err = ignore.Walk(ctx, tree, dir, func(e ignore.Entry) error {
		if len(dirs)+len(files) >= maxListEntries {
			resp.Truncated = true
			return ignore.ErrStop
		}
		entry := &penguinv1.WorkspaceEntry{Name: path.Base(e.Rel), Path: e.Rel}
		switch {
		case e.Entry.IsDir():
			entry.Dir = true
			dirs = append(dirs, entry)
			return fs.SkipDir
		case e.Entry.Type()&fs.ModeSymlink != 0:
			entry.Link = true
		default:
			if info, err := e.Entry.Info(); err == nil {
				entry.Size = info.Size()
			}
		}
		files = append(files, entry)
		return nil
	})
	if err != nil {
		return nil, toStatus(err)
	}
	resp.Entries = append(dirs, files...)
	return resp, nil
}

// ReadWorkspaceFile implements penguinv1.EnvironmentServiceServer.
func (s *Service) ReadWorkspaceFile(_ context.Context, req *penguinv1.ReadWorkspaceFileRequest) (*penguinv1.ReadWorkspaceFileResponse, error) {
	name, err := cleanRel(req.GetPath())
	if err != nil {
		return nil, err
	}
	if name == "." {
		return nil, status.Error(codes.InvalidArgument, "a file path is required")
	}
	root, err := s.openWorkspace(req.GetWorkspace())
	if err != nil {
		return nil, err
	}
	defer root.Close()
	tree := root.Workspace()
	f, info, err := tree.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, status.Errorf(codes.NotFound, "%q is not a file of the workspace", req.GetPath())
	}
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%q: %v", req.GetPath(), err)
	}
	f.Close()
	resp := &penguinv1.ReadWorkspaceFileResponse{Size: info.Size()}
	if info.Size() > maxReadBytes {
		resp.TooLarge = true
		return resp, nil
	}
	data, err := tree.ReadFile(name, maxReadBytes)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "%q: %v", req.GetPath(), err)
	}
	if !checkpoint.IsText(data) {
		resp.Binary = true
		return resp, nil
	}
	resp.Content = string(data)
	return resp, nil
}

// cleanRel checks a slash-separated path relative to the workspace; ""
// is its top, ".".
func cleanRel(p string) (string, error) {
	if strings.ContainsRune(p, 0) {
		return "", status.Error(codes.InvalidArgument, "the path contains a NUL byte")
	}
	c := path.Clean("/" + p)[1:]
	if c == "" {
		return ".", nil
	}
	if strings.HasPrefix(p, "/") || c != strings.TrimSuffix(p, "/") {
		return "", status.Error(codes.InvalidArgument, fmt.Sprintf("path %q must be relative to the workspace, without . or .. parts", p))
	}
	return c, nil
}
