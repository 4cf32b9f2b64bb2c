package session

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/loop"
)

// checkpointWait bounds one checkpoint of a turn's workspace: a walk of a
// large tree must not hold a task's start or end for long.
const checkpointWait = 2 * time.Minute

// turnCheckpoint takes the checkpoint a turn's change is measured from
// (since empty), or the one it is measured to (since the first); "" when
// there is none to take (a subagent's turn is its parent's, and an
// environment service that cannot checkpoint leaves turns without undo).
// Given since, the environment answers it again without walking the
// workspace when nothing it ran since could have written there (a turn
// whose tools only read).
func (rt *Runtime) turnCheckpoint(p *prepared, since string) string {
	if p == nil || p.row.ParentID != "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkpointWait)
	defer cancel()
	resp, err := rt.m.opts.Environment.CheckpointWorkspace(ctx, &penguinv1.CheckpointWorkspaceRequest{Workspace: p.row.Workspace, Since: since})
	if err != nil {
		if status.Code(err) != codes.Unimplemented {
			rt.m.log.Warn("the workspace could not be checkpointed; this turn's change cannot be undone", "session", rt.id, "error", err)
		}
		return ""
	}
	return resp.GetCheckpoint()
}

// recordTurnChange checkpoints the workspace at a turn's end and, when
// files changed since before, records what changed in the log.
func (rt *Runtime) recordTurnChange(t *task, p *prepared, before string) {
	rt.mu.Lock()
	handover := t.handover
	rt.mu.Unlock()
	if before == "" || handover {
		// A handed-over turn goes on elsewhere, from its log: its change
		// is not this replica's to record.
		return
	}
	after := rt.turnCheckpoint(p, before)
	if after == "" || after == before {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkpointWait)
	defer cancel()
	diff, err := rt.m.opts.Environment.DiffCheckpoints(ctx, &penguinv1.DiffCheckpointsRequest{Workspace: p.row.Workspace, From: before, To: after})
	if err != nil {
		rt.m.log.Warn("the turn's workspace change could not be listed; it cannot be undone", "session", rt.id, "error", err)
		return
	}
	if len(diff.GetFiles()) == 0 {
		return // only directories changed
	}
	change := &penguinv1.WorkspaceChange{
		Kind: penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_TURN, Before: before, After: after,
		Files: diff.GetFiles(), Incomplete: diff.GetIncomplete(),
	}
	if err := rt.Emit(context.Background(), workspaceChangeMessage(change)); err != nil {
		rt.m.log.Warn("the turn's workspace change could not be recorded", "session", rt.id, "error", err)
	}
}

func workspaceChangeMessage(c *penguinv1.WorkspaceChange) *penguinv1.OmniMessage {
	return &penguinv1.OmniMessage{Timestamp: timestamppb.Now(), Payload: &penguinv1.OmniMessage_WorkspaceChange{WorkspaceChange: c}}
}

// WorkspaceChanges lists what the session's turns changed in the
// workspace, oldest first.
func (m *Manager) WorkspaceChanges(ctx context.Context, id string) ([]*penguinv1.TurnChange, error) {
	if _, err := m.store.GetSession(ctx, id); err != nil {
		return nil, err
	}
	var out []*penguinv1.TurnChange
	bySeq := map[int64]*penguinv1.TurnChange{}
	prompt := ""
	for after := int64(0); ; {
		events, err := m.store.ReadEvents(ctx, id, after, 1000)
		if err != nil {
			return nil, err
		}
		if len(events) == 0 {
			break
		}
		for _, e := range events {
			after = e.Sequence
			if t := e.Message.GetText(); t != nil && t.GetRole() == penguinv1.Role_ROLE_USER && t.GetSender() != penguinv1.Sender_SENDER_HARNESS {
				prompt = firstLine(t.GetText())
			}
			c := e.Message.GetWorkspaceChange()
			switch c.GetKind() {
			case penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_TURN:
				tc := &penguinv1.TurnChange{Sequence: e.Sequence, Time: e.Message.GetTimestamp(), Change: c, Prompt: prompt, FileCount: int32(len(c.GetFiles()))}
				out = append(out, tc)
				bySeq[e.Sequence] = tc
			case penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_UNDO, penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_REDO:
				if tc := bySeq[c.GetTurnSequence()]; tc != nil {
					tc.Undone = c.GetKind() == penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_UNDO
				}
			}
		}
	}
	return out, nil
}

// firstLine is text's first line, cut to 80 characters.
func firstLine(text string) string {
	line, _, _ := strings.Cut(strings.TrimSpace(text), "\n")
	if r := []rune(line); len(r) > 80 {
		line = string(r[:79]) + "…"
	}
	return line
}

// findChange returns the turn change at seq; seq 0 picks the last one not
// undone (for redo: the last undone one).
func (m *Manager) findChange(ctx context.Context, id string, seq int64, redo bool) (*penguinv1.TurnChange, error) {
	changes, err := m.WorkspaceChanges(ctx, id)
	if err != nil {
		return nil, err
	}
	if seq == 0 {
		for i := len(changes) - 1; i >= 0; i-- {
			if changes[i].GetUndone() == redo {
				return changes[i], nil
			}
		}
		if redo {
			return nil, fmt.Errorf("%w: no undone turn to redo", ErrNotFound)
		}
		return nil, fmt.Errorf("%w: no turn of this session changed the workspace, or every change is undone already", ErrNotFound)
	}
	for _, c := range changes {
		if c.GetSequence() == seq {
			return c, nil
		}
	}
	return nil, fmt.Errorf("%w: no turn's workspace change at sequence %d", ErrNotFound, seq)
}

// Bounds of a change's files per answer.
const (
	// ListedFiles is how many of each change's files WorkspaceChanges'
	// callers list; a change's file count says how many there are.
	ListedFiles = 100
	// DefaultDiffPage and MaxDiffPage bound a page of WorkspaceDiff.
	DefaultDiffPage, MaxDiffPage = 100, 1000
)

// WorkspaceDiff returns a page of a turn's change: pageSize files from
// the token's on (by path), each text file with its diff, and the token
// of the next page, "" on the last. The page is cut from the files the
// log recorded, so only its own diffs are computed.
func (m *Manager) WorkspaceDiff(ctx context.Context, id string, seq int64, pageSize int, token string) (*penguinv1.TurnChange, string, error) {
	switch {
	case pageSize <= 0:
		pageSize = DefaultDiffPage
	case pageSize > MaxDiffPage:
		pageSize = MaxDiffPage
	}
	start := 0
	if token != "" {
		n, err := strconv.Atoi(token)
		if err != nil || n < 0 {
			return nil, "", fmt.Errorf("%w: page token %q is not one this service gave", ErrInvalid, token)
		}
		start = n
	}
	tc, err := m.findChange(ctx, id, seq, false)
	if err != nil {
		return nil, "", err
	}
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, "", err
	}
	c := tc.GetChange()
	all := c.GetFiles()
	end := min(start+pageSize, len(all))
	next := ""
	if end < len(all) {
		next = strconv.Itoa(end)
	}
	var files []*penguinv1.FileChange
	if start < len(all) {
		paths := make([]string, 0, end-start)
		for _, f := range all[start:end] {
			paths = append(paths, f.GetPath())
		}
		diff, err := m.opts.Environment.DiffCheckpoints(ctx, &penguinv1.DiffCheckpointsRequest{Workspace: row.Workspace, From: c.GetBefore(), To: c.GetAfter(), WithDiff: true, Paths: paths})
		if err != nil {
			return nil, "", downstream(fmt.Sprintf("the diff of change #%d", tc.GetSequence()), err)
		}
		files = diff.GetFiles()
	}
	full := &penguinv1.WorkspaceChange{Kind: c.GetKind(), Before: c.GetBefore(), After: c.GetAfter(), Files: files, Incomplete: c.GetIncomplete()}
	return &penguinv1.TurnChange{Sequence: tc.GetSequence(), Time: tc.GetTime(), Change: full, Undone: tc.GetUndone(), Prompt: tc.GetPrompt(), FileCount: int32(len(all))}, next, nil
}

// UndoResult is what an undo or a redo did.
type UndoResult struct {
	Change       *penguinv1.WorkspaceChange
	Sequence     int64
	TurnSequence int64
	Overwritten  []string
}

// UndoChange restores the files of a turn's change to what they were
// before it (redo: after it) on an idle session, and records the restore
// in the log with a note that tells the model at its next turn.
func (m *Manager) UndoChange(ctx context.Context, id string, seq int64, redo, force bool) (*UndoResult, error) {
	rt, err := m.acquire(ctx, id)
	if err != nil {
		return nil, err
	}
	defer m.release(rt)
	t := newTask()
	t.compaction = true // takes no steering
	if err := rt.claim(ctx, t, false); err != nil {
		return nil, err
	}
	res, err := m.undoClaimed(ctx, rt, seq, redo, force)
	if err != nil {
		rt.abandon(t, nil)
		return nil, err
	}
	rt.finish(t, nil, loop.Result{Status: penguinv1.StopReason_STOP_REASON_COMPLETED})
	return res, nil
}

// undoClaimed is UndoChange once it holds the session.
func (m *Manager) undoClaimed(ctx context.Context, rt *Runtime, seq int64, redo, force bool) (*UndoResult, error) {
	tc, err := m.findChange(ctx, rt.id, seq, redo)
	if err != nil {
		return nil, err
	}
	c := tc.GetChange()
	switch {
	case c.GetIncomplete() != "":
		return nil, fmt.Errorf("%w: the turn's change is too large to undo: %s", ErrPrecondition, c.GetIncomplete())
	case redo && !tc.GetUndone():
		return nil, fmt.Errorf("%w: the change at sequence %d is not undone, so there is nothing to redo", ErrPrecondition, tc.GetSequence())
	case !redo && tc.GetUndone():
		return nil, fmt.Errorf("%w: the change at sequence %d is undone already (redo restores it)", ErrPrecondition, tc.GetSequence())
	}
	row, err := m.store.GetSession(ctx, rt.id)
	if err != nil {
		return nil, err
	}
	from, to, kind, action, verb := c.GetAfter(), c.GetBefore(), penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_UNDO, "undo", "undid"
	if redo {
		from, to, kind, action, verb = c.GetBefore(), c.GetAfter(), penguinv1.WorkspaceChangeKind_WORKSPACE_CHANGE_KIND_REDO, "redo", "redid"
	}
	resp, err := m.opts.Environment.RestoreCheckpoint(ctx, &penguinv1.RestoreCheckpointRequest{Workspace: row.Workspace, From: from, To: to, Force: force})
	if err != nil {
		return nil, downstream(fmt.Sprintf("%s change #%d", action, tc.GetSequence()), err)
	}
	rec := &penguinv1.WorkspaceChange{
		Kind: kind, Before: resp.GetBefore(), After: resp.GetAfter(), Files: resp.GetFiles(),
		TurnSequence: tc.GetSequence(), Forced: len(resp.GetOverwritten()) > 0,
	}
	var paths []string
	for _, f := range resp.GetFiles() {
		paths = append(paths, f.GetPath())
	}
	note := fmt.Sprintf("[The user %s the workspace changes of an earlier turn (change #%d). These files changed outside your tools since: %s. Read them again before relying on what you saw of them.]",
		verb, tc.GetSequence(), strings.Join(paths, ", "))
	if err := rt.Emit(ctx, workspaceChangeMessage(rec)); err != nil {
		return nil, err
	}
	recorded := rt.journal.Last()
	if err := rt.Emit(ctx, omni.SenderText(penguinv1.Sender_SENDER_HARNESS, note)); err != nil {
		return nil, err
	}
	if err := rt.journal.Flush(); err != nil {
		return nil, fmt.Errorf("%w; the files were restored but the log does not say so: %v", ErrNotRecorded, err)
	}
	return &UndoResult{Change: rec, Sequence: recorded, TurnSequence: tc.GetSequence(), Overwritten: resp.GetOverwritten()}, nil
}

// WorkspaceFiles lists one directory of the session's workspace.
func (m *Manager) WorkspaceFiles(ctx context.Context, id, dir string) (*penguinv1.ListWorkspaceFilesResponse, error) {
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	resp, err := m.opts.Environment.ListWorkspaceFiles(ctx, &penguinv1.ListWorkspaceFilesRequest{Workspace: row.Workspace, Dir: dir})
	if err != nil {
		return nil, downstream("list the workspace", err)
	}
	return resp, nil
}

// WorkspaceFile reads one file of the session's workspace.
func (m *Manager) WorkspaceFile(ctx context.Context, id, name string) (*penguinv1.ReadWorkspaceFileResponse, error) {
	row, err := m.store.GetSession(ctx, id)
	if err != nil {
		return nil, err
	}
	resp, err := m.opts.Environment.ReadWorkspaceFile(ctx, &penguinv1.ReadWorkspaceFileRequest{Workspace: row.Workspace, Path: name})
	if err != nil {
		return nil, downstream("read the workspace file", err)
	}
	return resp, nil
}
