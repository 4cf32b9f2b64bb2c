package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/textdiff"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

const (
	defaultReadLimit = 2000
	maxLineChars     = 2000
	// readScanCap bounds how much of a file read_file scans (to count its
	// lines and find a window).
	readScanCap = 8 << 20
	// maxEditBytes bounds the files edit_file and write_file diff.
	maxEditBytes = 8 << 20
	sniffBytes   = 8192
	// diffEditCap bounds the diff search; beyond it a summary is shown.
	diffEditCap = 2000
	// maxDiffLines bounds an echoed diff before it becomes a summary.
	maxDiffLines = 200
	maxEditHunks = 5
)

// fileError turns an os error into a message about the argument.
func fileError(arg string, err error) error {
	switch {
	case errors.Is(err, workspace.ErrOutside):
		return err
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%s does not exist", arg)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("permission denied for %s", arg)
	case errors.Is(err, workspace.ErrIsDir):
		return fmt.Errorf("%s is a directory", arg)
	case errors.Is(err, workspace.ErrNotRegular):
		return fmt.Errorf("%s %v: the file tools only handle regular files; use exec_command for it", arg, err)
	default:
		return fmt.Errorf("%s: %w", arg, err)
	}
}

// readFile is read_file.
type readFile struct{ d Deps }

func (t *readFile) Permission() penguinv1.Permission { return permR }

func (t *readFile) Definition() *penguinv1.ToolDefinition { return readFileDef }

var readFileDef = def("read_file",
	"Read a text file as numbered lines (cat -n style: line number, tab, text), a window of limit lines starting at offset. "+
		"Relative paths start at the workspace root. Binary files are refused: use exec_command for them, or read_image for images.",
	`{"type":"object","properties":{`+
		`"file_path":{"type":"string","description":"The file, absolute or relative to the workspace."},`+
		`"offset":{"type":"integer","description":"The 1-based line to start at; default 1."},`+
		`"limit":{"type":"integer","description":"The most lines to return; default 2000."}`+
		`},"required":["file_path"]}`)

type readArgs struct {
	FilePath string `json:"file_path"`
	Offset   *int   `json:"offset"`
	Limit    *int   `json:"limit"`
}

func (t *readFile) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a readArgs
	if err := tool.DecodeArgs(raw, &a, "file_path"); err != nil {
		return tool.Result{}, err
	}
	offset, limit := 1, defaultReadLimit
	if a.Offset != nil {
		if *a.Offset < 1 {
			return tool.Result{}, errors.New(`"offset" is 1-based and must be at least 1`)
		}
		offset = *a.Offset
	}
	if a.Limit != nil {
		if *a.Limit < 1 {
			return tool.Result{}, errors.New(`"limit" must be at least 1`)
		}
		limit = *a.Limit
	}
	tree, name, err := t.d.Root.Locate(a.FilePath, false)
	if err != nil {
		return tool.Result{}, err
	}
	f, info, err := tree.Open(name)
	if errors.Is(err, workspace.ErrIsDir) {
		return tool.Result{}, fmt.Errorf("%s is a directory: list it with glob or exec_command", a.FilePath)
	}
	if err != nil {
		return tool.Result{}, fileError(a.FilePath, err)
	}
	defer f.Close()
	// The buffer is the file's size, from 512 bytes up to 64 KiB: most
	// files read are far smaller, and a buffer of 64 KiB for each (then
	// of the 8 KiB sniffed) was most of what a task's read_file
	// allocated. A file smaller than the sniff is sniffed whole, as it
	// was when it was opened. A line longer than the buffer is gathered
	// piece by piece (ReadString) all the same. The sniff asks for no
	// more than the file's size: a Peek past it read until it saw the
	// end, and forgot it, so that the end was read twice (a read system
	// call of each read_file).
	size := int(min(max(info.Size()+1, 512), 64<<10))
	br := bufio.NewReaderSize(io.LimitReader(f, readScanCap), size)
	head, _ := br.Peek(int(min(sniffBytes, int64(size), info.Size())))
	if bytes.IndexByte(head, 0) >= 0 {
		return tool.Result{}, fmt.Errorf("%s is a binary file (it contains NUL bytes): inspect it with exec_command (file, xxd, ...), or use read_image for an image", a.FilePath)
	}
	if info.Size() == 0 {
		_, _ = out.WriteString("[empty file]")
		return tool.Result{}, nil
	}
	var b strings.Builder
	line, shown, last := 0, 0, 0
	more := false
	for {
		if err := ctx.Err(); err != nil {
			return tool.Result{}, err
		}
		text, err := br.ReadString('\n')
		if text == "" && err != nil {
			break
		}
		line++
		if line >= offset && shown < limit {
			text = strings.TrimSuffix(strings.TrimSuffix(text, "\n"), "\r")
			if n := utf8.RuneCountInString(text); n > maxLineChars {
				cut := 0
				for i := range text {
					if cut == maxLineChars {
						text = text[:i] + fmt.Sprintf("… [line cut: %d more characters]", n-maxLineChars)
						break
					}
					cut++
				}
			}
			fmt.Fprintf(&b, "%6d\t%s\n", line, text)
			shown++
			last = line
		} else if shown >= limit {
			more = true
		}
		if err != nil {
			break
		}
	}
	scanCut := info.Size() > readScanCap
	if shown == 0 {
		if scanCut {
			return tool.Result{}, fmt.Errorf("offset %d lies beyond the first %d bytes that read_file scans; read further with exec_command (sed -n, tail)", offset, readScanCap)
		}
		return tool.Result{}, fmt.Errorf("offset %d is past the end of %s, which has %d lines", offset, a.FilePath, line)
	}
	_, _ = out.WriteString(b.String())
	var note string
	switch {
	case more && scanCut:
		note = fmt.Sprintf("[lines %d-%d shown; more follow: continue with offset=%d]", offset, last, last+1)
	case more:
		note = fmt.Sprintf("[lines %d-%d of %d shown; continue with offset=%d]", offset, last, line, last+1)
	case scanCut:
		note = fmt.Sprintf("[lines %d-%d shown; the file is larger than the %d bytes read_file scans, read the rest with exec_command]", offset, last, readScanCap)
	}
	return tool.Result{Note: note}, nil
}

// writeFile is write_file.
type writeFile struct{ d Deps }

func (t *writeFile) Permission() penguinv1.Permission { return permRW }

func (t *writeFile) Definition() *penguinv1.ToolDefinition { return writeFileDef }

var writeFileDef = def("write_file",
	"Create a file or overwrite it whole with content, creating parent directories as needed. "+
		"Says whether it created or overwrote the file; an overwrite shows a diff against the old content.",
	`{"type":"object","properties":{`+
		`"file_path":{"type":"string","description":"The file, absolute or relative to the workspace."},`+
		`"content":{"type":"string","description":"The complete content; an empty string makes an empty file."}`+
		`},"required":["file_path","content"]}`)

type writeArgs struct {
	FilePath string `json:"file_path"`
	Content  string `json:"content"`
}

func (t *writeFile) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a writeArgs
	if err := tool.DecodeArgs(raw, &a, "file_path", "content"); err != nil {
		return tool.Result{}, err
	}
	if t.d.ReadOnly {
		return tool.Result{}, errReadOnly
	}
	tree, name, err := t.d.Root.Locate(a.FilePath, true)
	if err != nil {
		return tool.Result{}, err
	}
	f, info, created, err := tree.OpenWrite(name, true)
	if err != nil {
		return tool.Result{}, fileError(a.FilePath, err)
	}
	defer f.Close()
	var old []byte
	if !created && info.Size() <= maxEditBytes {
		if old, err = io.ReadAll(io.LimitReader(f, maxEditBytes)); err != nil {
			return tool.Result{}, fileError(a.FilePath, err)
		}
	}
	// A file that ended its lines with CRLF keeps doing so when the new
	// content ends them with "\n" alone, as a model that read the file
	// (read_file shows lines without their "\r") writes them.
	kept := ""
	if textdiff.CRLF(string(old)) && !strings.Contains(a.Content, "\r") && strings.Contains(a.Content, "\n") {
		a.Content = textdiff.ToCRLF(a.Content)
		kept = ", its CRLF line endings kept"
	}
	if err := workspace.Replace(f, []byte(a.Content)); err != nil {
		return tool.Result{}, fileError(a.FilePath, err)
	}
	rel := tree.Show(name)
	lines := len(textdiff.Lines(a.Content))
	if created {
		fmt.Fprintf(out, "Created %s (%d lines, %d bytes)", rel, lines, len(a.Content))
		return tool.Result{}, nil
	}
	fmt.Fprintf(out, "Overwrote %s (%d lines, %d bytes%s)", rel, lines, len(a.Content), kept)
	if old == nil {
		return tool.Result{}, nil
	}
	if string(old) == a.Content {
		_, _ = out.WriteString("; the content is unchanged")
		return tool.Result{}, nil
	}
	_, _ = out.WriteString("\n" + diffSummary(rel, string(old), a.Content, 0))
	return tool.Result{}, nil
}

// diffSummary renders a unified diff of a change, or a +X/-Y line count
// when it is too large to be useful. maxHunks > 0 caps the hunks shown.
// Line endings are compared apart from the lines: a diff of CRLF text
// shows its lines without "\r", and a change of endings alone is said in
// words rather than shown as every line removed and added again.
func diffSummary(name, before, after string, maxHunks int) string {
	eol := ""
	if b, a := textdiff.CRLF(before), textdiff.CRLF(after); b != a {
		eol = "(the line endings changed from LF to CRLF)"
		if b {
			eol = "(the line endings changed from CRLF to LF)"
		}
	}
	before, after = textdiff.ToLF(before), textdiff.ToLF(after)
	if before == after && eol != "" {
		return eol
	}
	s := diffLines(name, before, after, maxHunks)
	if eol != "" {
		s = eol + "\n" + s
	}
	return s
}

// diffLines renders the diff of two texts with "\n" line ends.
func diffLines(name, before, after string, maxHunks int) string {
	ops, ok := textdiff.Diff(textdiff.Lines(before), textdiff.Lines(after), diffEditCap)
	if !ok {
		return "(the change is too large to show as a diff)"
	}
	added, removed := textdiff.Count(ops)
	hunks := textdiff.Hunks(ops, 3)
	extra := 0
	if maxHunks > 0 && len(hunks) > maxHunks {
		extra = len(hunks) - maxHunks
		hunks = hunks[:maxHunks]
	}
	n := 0
	for _, h := range hunks {
		n += len(h.Ops)
	}
	if n > maxDiffLines {
		return fmt.Sprintf("(+%d/-%d lines; the diff is too long to show)", added, removed)
	}
	s := textdiff.Render(name, hunks)
	if extra > 0 {
		s += fmt.Sprintf("…and %d more changed regions\n", extra)
	}
	return strings.TrimSuffix(s, "\n")
}

// editFile is edit_file.
type editFile struct{ d Deps }

func (t *editFile) Permission() penguinv1.Permission { return permRW }

func (t *editFile) Definition() *penguinv1.ToolDefinition { return editFileDef }

var editFileDef = def("edit_file",
	"Replace exact text in an existing file. old_string must occur exactly once (include enough surrounding lines to make it unique), "+
		"or set replace_all to replace every occurrence. Whitespace and indentation must match exactly. Returns a unified diff of the change.",
	`{"type":"object","properties":{`+
		`"file_path":{"type":"string","description":"The file, absolute or relative to the workspace."},`+
		`"old_string":{"type":"string","description":"The exact text to replace."},`+
		`"new_string":{"type":"string","description":"The replacement; it must differ from old_string."},`+
		`"replace_all":{"type":"boolean","description":"Replace every occurrence; default false."}`+
		`},"required":["file_path","old_string","new_string"]}`)

type editArgs struct {
	FilePath   string `json:"file_path"`
	OldString  string `json:"old_string"`
	NewString  string `json:"new_string"`
	ReplaceAll bool   `json:"replace_all"`
}

func (t *editFile) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a editArgs
	if err := tool.DecodeArgs(raw, &a, "file_path", "old_string", "new_string"); err != nil {
		return tool.Result{}, err
	}
	if t.d.ReadOnly {
		return tool.Result{}, errReadOnly
	}
	if a.OldString == "" {
		return tool.Result{}, errors.New(`"old_string" is empty: use write_file to create or rewrite a whole file`)
	}
	if a.OldString == a.NewString {
		return tool.Result{}, errors.New(`"new_string" is the same as "old_string": nothing would change`)
	}
	tree, name, err := t.d.Root.Locate(a.FilePath, true)
	if err != nil {
		return tool.Result{}, err
	}
	f, info, _, err := tree.OpenWrite(name, false)
	if err != nil {
		return tool.Result{}, fileError(a.FilePath, err)
	}
	defer f.Close()
	if info.Size() > maxEditBytes {
		return tool.Result{}, fmt.Errorf("%s is larger than %d bytes; edit it with exec_command", a.FilePath, maxEditBytes)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxEditBytes+1))
	if err != nil {
		return tool.Result{}, fileError(a.FilePath, err)
	}
	if len(data) > maxEditBytes {
		return tool.Result{}, fmt.Errorf("%s is larger than %d bytes; edit it with exec_command", a.FilePath, maxEditBytes)
	}
	content := string(data)
	if textdiff.CRLF(content) {
		// In a file that ends its lines with CRLF, the line ends of
		// old_string and new_string are CRLF too: the model saw the
		// lines without their "\r" (read_file strips it), and a "\n"
		// alone written into the file would mix the endings.
		a.OldString, a.NewString = textdiff.ToCRLF(a.OldString), textdiff.ToCRLF(a.NewString)
	}
	count := strings.Count(content, a.OldString)
	switch {
	case count == 0:
		return tool.Result{}, fmt.Errorf("old_string was not found in %s; check whitespace and indentation, or read the file again", a.FilePath)
	case count > 1 && !a.ReplaceAll:
		return tool.Result{}, fmt.Errorf("old_string occurs %d times in %s; include more surrounding text to make it unique, or set replace_all", count, a.FilePath)
	}
	var updated string
	if a.ReplaceAll {
		updated = strings.ReplaceAll(content, a.OldString, a.NewString)
	} else {
		updated = strings.Replace(content, a.OldString, a.NewString, 1)
	}
	if err := workspace.Replace(f, []byte(updated)); err != nil {
		return tool.Result{}, fileError(a.FilePath, err)
	}
	rel := tree.Show(name)
	plural := "s"
	if count == 1 {
		plural = ""
	}
	fmt.Fprintf(out, "Replaced %d occurrence%s in %s\n%s", count, plural, rel, diffSummary(rel, content, updated, maxEditHunks))
	return tool.Result{}, nil
}
