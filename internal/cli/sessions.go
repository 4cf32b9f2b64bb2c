package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"github.com/penguin-agent/penguin/internal/termtext"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/transcript"
)

// Sessions runs `penguin sessions list|show|export|delete|...`: list
// prints a table, show renders a session's history as a terminal would
// have shown it, export writes its trace files (one per model context)
// into a directory, delete removes it; changes, diff, undo and redo show
// and restore what its turns changed in the workspace.
func Sessions(ctx context.Context, engine penguinv1.EngineServiceClient, args []string, out io.Writer, color bool) error {
	if len(args) == 0 {
		return errors.New("usage: penguin sessions list | show ID | export ID [DIR] | delete ID | rename ID TITLE | pin ID | unpin ID | archive ID | unarchive ID | changes ID | diff ID [SEQ] | undo ID [SEQ] [--force] | redo ID [SEQ]")
	}
	verb, rest := args[0], args[1:]
	switch verb {
	case "changes", "diff", "undo", "redo":
		if len(rest) == 0 {
			return errors.New(workspaceUsage)
		}
		text, err := workspaceVerb(ctx, engine, verb, rest[0], rest[1:])
		if err != nil {
			return err
		}
		fmt.Fprintln(out, text)
		return nil
	}
	switch {
	case verb == "export" && (len(rest) == 1 || len(rest) == 2):
	case verb == "export":
		return errors.New("usage: penguin sessions export ID [DIR]")
	case verb == "rename" && len(rest) < 2:
		return errors.New("usage: penguin sessions rename ID TITLE")
	case verb == "rename":
	case verb != "list" && len(rest) != 1:
		return fmt.Errorf("usage: penguin sessions %s ID", verb)
	}
	switch verb {
	case "list":
		return ListSessions(ctx, engine, "", out)
	case "show":
		return showSession(ctx, engine, rest[0], out, color)
	case "export":
		dir := "."
		if len(rest) == 2 {
			dir = rest[1]
		}
		return exportSession(ctx, engine, rest[0], dir, out)
	case "delete":
		if _, err := engine.DeleteSession(ctx, &penguinv1.DeleteSessionRequest{SessionId: rest[0]}); err != nil {
			return err
		}
		fmt.Fprintf(out, "deleted %s\n", rest[0])
		return nil
	case "rename", "pin", "unpin", "archive", "unarchive":
		return updateSession(ctx, engine, verb, rest[0], strings.Join(rest[1:], " "), out)
	}
	return fmt.Errorf("unknown sessions command %q: want list, show, export, delete, rename, pin, unpin, archive, unarchive, changes, diff, undo or redo", verb)
}

// updateSession renames, pins, unpins, archives or unarchives a session
// through UpdateSession, and says what it did. Archiving unpins, as the
// web app does, so an archived session never sorts first.
func updateSession(ctx context.Context, engine penguinv1.EngineServiceClient, verb, id, title string, out io.Writer) error {
	req := &penguinv1.UpdateSessionRequest{SessionId: id}
	yes, no := true, false
	switch verb {
	case "rename":
		req.Title = &title
	case "pin":
		req.Pinned = &yes
	case "unpin":
		req.Pinned = &no
	case "archive":
		req.Archived, req.Pinned = &yes, &no
	case "unarchive":
		req.Archived = &no
	}
	resp, err := engine.UpdateSession(ctx, req)
	if err != nil {
		return err
	}
	s := resp.GetSession()
	switch verb {
	case "rename":
		fmt.Fprintf(out, "renamed %s to %q\n", id, s.GetTitle())
	default:
		done := map[string]string{"pin": "pinned", "unpin": "unpinned", "archive": "archived", "unarchive": "unarchived"}
		fmt.Fprintf(out, "%s %s\n", done[verb], id)
	}
	return nil
}

// marks labels a pinned or archived session in the list.
func marks(s *penguinv1.Session) string {
	switch {
	case s.GetArchived():
		return "[archived] "
	case s.GetPinned():
		return "[pinned] "
	}
	return ""
}

// ListSessions prints the table of the sessions of project (its id), or
// of every project the caller may read when project is empty.
func ListSessions(ctx context.Context, engine penguinv1.EngineServiceClient, project string, out io.Writer) error {
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SESSION\tMODEL\tSTATE\tUPDATED\tTITLE")
	token := ""
	for {
		resp, err := engine.ListSessions(ctx, &penguinv1.ListSessionsRequest{PageToken: token, ProjectId: project})
		if err != nil {
			return err
		}
		for _, s := range resp.GetSessions() {
			fmt.Fprintf(tw, "%s\t%s/%s\t%s\t%s\t%s\n", s.GetSessionId(), s.GetModel().GetProvider(), s.GetModel().GetModelId(),
				enumword.Word(s.GetState()), s.GetUpdatedAt().AsTime().Local().Format("2006-01-02 15:04"), marks(s)+termtext.Clean(s.GetTitle()))
		}
		if token = resp.GetNextPageToken(); token == "" {
			return tw.Flush()
		}
	}
}

func showSession(ctx context.Context, engine penguinv1.EngineServiceClient, id string, out io.Writer, color bool) error {
	r := NewRenderer(out, RendererOptions{Color: color})
	var after int64
	for {
		resp, err := engine.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: id, AfterSequence: after})
		if err != nil {
			return err
		}
		for _, ev := range resp.GetEvents() {
			if t := ev.GetMessage().GetText(); t != nil && t.GetRole() == penguinv1.Role_ROLE_USER && t.GetSender() == penguinv1.Sender_SENDER_UNSPECIFIED {
				if line := UserLine(t.GetText()); line != "" {
					fmt.Fprintln(out, line)
				}
			}
			r.Event(ev)
			after = ev.GetSequence()
		}
		if !resp.GetMore() || len(resp.GetEvents()) == 0 {
			if u := r.Usage(); u != nil {
				fmt.Fprintln(out, FormatUsage(u))
			}
			return nil
		}
	}
}

// exportSession writes a session's trace into dir as trace files are laid
// out (docs/trace-format.md): one file per model context, <id>_001.jsonl for the
// first and the next index after each compaction. It prints the path of
// each file written. An existing file is never overwritten: the export
// stops there and says which. Each file is written under a temporary name
// and takes its own only when complete, so a failed export leaves no
// partial trace behind.
func exportSession(ctx context.Context, engine penguinv1.EngineServiceClient, id, dir string, out io.Writer) error {
	if id == "" || filepath.Base(id) != id || id == "." || id == ".." {
		return fmt.Errorf("%q is not a session id", id)
	}
	stream, err := engine.ExportTrace(ctx, &penguinv1.ExportTraceRequest{SessionId: id})
	if err != nil {
		return err
	}
	var f *traceFile
	defer func() { f.discard() }()
	for {
		line, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		// An engine that predates context indexes sends none: one file.
		if idx := max(int(line.GetContextIndex()), 1); f == nil || idx != f.index {
			if err := f.finish(out); err != nil {
				return err
			}
			if f, err = newTraceFile(dir, id, idx); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintln(f.w, line.GetLine()); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
	}
	if f == nil {
		return fmt.Errorf("session %s has no trace to export", id)
	}
	err = f.finish(out)
	f = nil
	return err
}

// traceFile is one context's trace file being written.
type traceFile struct {
	index int
	path  string // the file's own name, taken when it is complete
	tmp   *os.File
	w     *bufio.Writer
}

func newTraceFile(dir, id string, index int) (*traceFile, error) {
	path := filepath.Join(dir, transcript.FileName(id, index))
	if _, err := os.Lstat(path); err == nil {
		return nil, fmt.Errorf("%s exists already; remove it or export into another directory", path)
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return nil, err
	}
	return &traceFile{index: index, path: path, tmp: tmp, w: bufio.NewWriter(tmp)}, nil
}

// finish gives a complete file its name and prints it; nil does nothing.
func (f *traceFile) finish(out io.Writer) error {
	if f == nil {
		return nil
	}
	if err := f.w.Flush(); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	if err := f.tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	// A link, unlike a rename, fails when the name is taken meanwhile.
	if err := os.Link(f.tmp.Name(), f.path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s exists already; remove it or export into another directory", f.path)
		}
		return fmt.Errorf("write %s: %w", f.path, err)
	}
	_ = os.Remove(f.tmp.Name())
	f.tmp = nil
	_, err := fmt.Fprintln(out, f.path)
	return err
}

// discard removes an unfinished file's temporary; nil does nothing.
func (f *traceFile) discard() {
	if f == nil || f.tmp == nil {
		return
	}
	f.tmp.Close()
	os.Remove(f.tmp.Name())
}
