package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// workspaceUsage is how the sessions verbs of a workspace are called.
const workspaceUsage = "usage: penguin sessions changes ID | diff ID [SEQ] | undo ID [SEQ] [--force] | redo ID [SEQ]"

// workspaceArgs reads the optional change sequence and --force after a
// session's id (SEQ 0, or none: the last change).
func workspaceArgs(args []string) (seq int64, force bool, err error) {
	for _, a := range args {
		switch {
		case a == "--force" || a == "-f":
			force = true
		case seq == 0:
			if seq, err = strconv.ParseInt(strings.TrimPrefix(a, "#"), 10, 64); err != nil || seq < 0 {
				return 0, false, fmt.Errorf("%q is not a change's sequence number; %s", a, workspaceUsage)
			}
		default:
			return 0, false, errors.New(workspaceUsage)
		}
	}
	return seq, force, nil
}

// changeKind is how a file change is marked, as git marks it.
func changeKind(k penguinv1.FileChangeKind) string {
	switch k {
	case penguinv1.FileChangeKind_FILE_CHANGE_KIND_ADDED:
		return "A"
	case penguinv1.FileChangeKind_FILE_CHANGE_KIND_DELETED:
		return "D"
	}
	return "M"
}

// fileLine is one file of a change: its mark, path and line counts.
func fileLine(f *penguinv1.FileChange) string {
	s := fmt.Sprintf("  %s %s", changeKind(f.GetKind()), f.GetPath())
	switch {
	case f.GetTooLarge():
		s += " (too large to undo)"
	case f.GetBinary():
		s += " (binary)"
	case f.GetAddedLines() > 0 || f.GetRemovedLines() > 0:
		s += fmt.Sprintf(" +%d -%d", f.GetAddedLines(), f.GetRemovedLines())
	}
	return s
}

// changesText lists a session's turn changes, oldest first.
func changesText(changes []*penguinv1.TurnChange) string {
	if len(changes) == 0 {
		return "no turn of this session has changed the workspace"
	}
	var b strings.Builder
	for _, c := range changes {
		state := ""
		if c.GetUndone() {
			state = " [undone]"
		}
		if c.GetChange().GetIncomplete() != "" {
			state += " [too large to undo]"
		}
		fmt.Fprintf(&b, "#%d %s %q%s\n", c.GetSequence(), c.GetTime().AsTime().Local().Format("15:04:05"), c.GetPrompt(), state)
		for _, f := range c.GetChange().GetFiles() {
			b.WriteString(fileLine(f) + "\n")
		}
		if more := int(c.GetFileCount()) - len(c.GetChange().GetFiles()); more > 0 {
			fmt.Fprintf(&b, "  ... and %d more file(s) (penguin sessions diff ID %d lists them all)\n", more, c.GetSequence())
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// maxDiffPages bounds the pages `diff` reads: a change holds at most a
// checkpoint's 20,000 paths twice, 40 pages of 1,000.
const maxDiffPages = 100

// turnDiff reads a turn's change page by page, its files and diffs
// together.
func turnDiff(ctx context.Context, engine penguinv1.EngineServiceClient, id string, seq int64) (*penguinv1.TurnChange, error) {
	var whole *penguinv1.TurnChange
	token := ""
	for range maxDiffPages {
		resp, err := engine.GetWorkspaceDiff(ctx, &penguinv1.GetWorkspaceDiffRequest{SessionId: id, Sequence: seq, PageSize: 1000, PageToken: token})
		if err != nil {
			return nil, err
		}
		if whole == nil {
			whole = resp.GetChange()
		} else {
			whole.Change.Files = append(whole.Change.Files, resp.GetChange().GetChange().GetFiles()...)
		}
		if token = resp.GetNextPageToken(); token == "" {
			return whole, nil
		}
	}
	return nil, fmt.Errorf("change #%d has more than %d pages of files", seq, maxDiffPages)
}

// diffText is one turn's change with its diffs.
func diffText(c *penguinv1.TurnChange) string {
	var b strings.Builder
	state := ""
	if c.GetUndone() {
		state = " (undone)"
	}
	fmt.Fprintf(&b, "change #%d of %q%s:\n", c.GetSequence(), c.GetPrompt(), state)
	for _, f := range c.GetChange().GetFiles() {
		b.WriteString(fileLine(f) + "\n")
	}
	for _, f := range c.GetChange().GetFiles() {
		if d := f.GetDiff(); d != "" {
			b.WriteString(d)
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// undoText says what an undo or a redo restored.
func undoText(resp *penguinv1.UndoWorkspaceChangeResponse, redo bool) string {
	verb := "undid"
	if redo {
		verb = "redid"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s change #%d: %d file(s) restored", verb, resp.GetTurnSequence(), len(resp.GetChange().GetFiles()))
	for _, f := range resp.GetChange().GetFiles() {
		b.WriteString("\n" + fileLine(f))
	}
	if o := resp.GetOverwritten(); len(o) > 0 {
		fmt.Fprintf(&b, "\noverwritten though changed since (kept in the checkpoint before the undo): %s", strings.Join(o, ", "))
	}
	return b.String()
}

// workspaceVerb runs `penguin sessions changes|diff|undo|redo`.
func workspaceVerb(ctx context.Context, engine penguinv1.EngineServiceClient, verb, id string, args []string) (string, error) {
	seq, force, err := workspaceArgs(args)
	if err != nil {
		return "", err
	}
	switch verb {
	case "changes":
		resp, err := engine.ListWorkspaceChanges(ctx, &penguinv1.ListWorkspaceChangesRequest{SessionId: id})
		if err != nil {
			return "", err
		}
		return changesText(resp.GetChanges()), nil
	case "diff":
		change, err := turnDiff(ctx, engine, id, seq)
		if err != nil {
			return "", err
		}
		return diffText(change), nil
	}
	redo := verb == "redo"
	resp, err := engine.UndoWorkspaceChange(ctx, &penguinv1.UndoWorkspaceChangeRequest{SessionId: id, Sequence: seq, Redo: redo, Force: force})
	if err != nil {
		return "", err
	}
	return undoText(resp, redo), nil
}
