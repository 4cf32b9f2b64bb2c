package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/penguin-agent/penguin/internal/textdiff"
)

// Collapsed views of tool outputs show this many head lines, then an
// elision marker and this many tail lines; outputs of up to
// 2*collapseLines+1 lines are shown whole.
const collapseLines = 4

// diffLines is how much of an edit's diff a collapsed view shows before
// its marker: enough for any small edit to be seen whole.
const diffLines = 40

// previewLines bounds the content and arguments an approval prompt shows.
const previewLines = 20

// The tools whose output is a diff of what they changed.
var diffTools = map[string]bool{"edit_file": true, "write_file": true}

// toolArgs is what the views read from a call's arguments; a field a tool
// does not have stays empty.
type toolArgs struct {
	Cmd         string `json:"cmd"`
	Description string `json:"description"`
	Workdir     string `json:"workdir"`
	FilePath    string `json:"file_path"`
	Content     string `json:"content"`
	OldString   string `json:"old_string"`
	NewString   string `json:"new_string"`
	ReplaceAll  bool   `json:"replace_all"`
	Pattern     string `json:"pattern"`
	Path        string `json:"path"`
	ProcessID   string `json:"process_id"`
}

// callTitle is how a tool call is shown in one line: its name and what it
// acts on (the command, the file, the pattern), not its raw JSON.
func callTitle(name, args string) string {
	var a toolArgs
	if json.Unmarshal([]byte(args), &a) != nil {
		return name + " " + clip(args, 200)
	}
	switch {
	case a.Cmd != "":
		return name + " $ " + firstLine(a.Cmd)
	case a.FilePath != "":
		return name + " " + a.FilePath
	case a.Pattern != "":
		s := name + " " + a.Pattern
		if a.Path != "" {
			s += " in " + a.Path
		}
		return s
	case a.ProcessID != "":
		return name + " " + a.ProcessID
	}
	return name + " " + clip(compactJSON(args), 200)
}

// approvalPreview is what an approval prompt shows of a call: what will
// happen if it is allowed. A command is shown whole with where it runs,
// an edit as the diff it applies, a new file's content as added lines,
// anything else as its arguments laid out.
func approvalPreview(name, args string) []string {
	var a toolArgs
	if json.Unmarshal([]byte(args), &a) != nil {
		return limitLines(strings.Split(args, "\n"), previewLines)
	}
	switch {
	case a.Cmd != "":
		var out []string
		if a.Description != "" {
			out = append(out, "# "+a.Description)
		}
		for _, l := range strings.Split(strings.TrimRight(a.Cmd, "\n"), "\n") {
			out = append(out, "$ "+l)
		}
		if a.Workdir != "" {
			out = append(out, "(in "+a.Workdir+")")
		}
		return out
	case name == "edit_file" && a.FilePath != "":
		ops, ok := textdiff.Diff(textdiff.Lines(a.OldString), textdiff.Lines(a.NewString), 4*previewLines)
		if !ok {
			return []string{fmt.Sprintf("%s: replace %d lines with %d lines", a.FilePath,
				len(textdiff.Lines(a.OldString)), len(textdiff.Lines(a.NewString)))}
		}
		diff := strings.Split(strings.TrimRight(textdiff.Render(a.FilePath, textdiff.Hunks(ops, 3)), "\n"), "\n")
		if a.ReplaceAll {
			diff = append(diff, "(every occurrence)")
		}
		return limitLines(diff, diffLines)
	case a.FilePath != "" && name == "write_file":
		lines := textdiff.Lines(a.Content)
		out := []string{fmt.Sprintf("+++ %s (%d lines)", a.FilePath, len(lines))}
		for _, l := range lines {
			out = append(out, "+"+l)
		}
		return limitLines(out, previewLines)
	}
	var pretty bytes.Buffer
	if json.Indent(&pretty, []byte(args), "", "  ") != nil {
		return limitLines(strings.Split(args, "\n"), previewLines)
	}
	return limitLines(strings.Split(pretty.String(), "\n"), previewLines)
}

// limitLines keeps the first n lines of lines and says how many it left
// out.
func limitLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("… (+%d lines)", len(lines)-n))
}

// diffStyle is the style of one line of a unified diff, or "" for a line
// that is not one.
func diffStyle(line string) string {
	switch {
	case strings.HasPrefix(line, "+++ ") || strings.HasPrefix(line, "--- "):
		return styleBold
	case strings.HasPrefix(line, "@@"):
		return styleCyan
	case strings.HasPrefix(line, "+"):
		return styleGreen
	case strings.HasPrefix(line, "-"):
		return styleRed
	}
	return ""
}

// outputView decides which lines of a finished tool output are shown,
// given that the first printed lines already were (streamed live): all of
// them, or when collapsed the head, an elision marker and the tail.
// marker is -1 when nothing was elided, else the index in shown where the
// marker stands.
func outputView(lines []string, printed int, collapse, diff bool) (shown []string, elided, marker int) {
	head, tail := collapseLines, collapseLines
	if diff {
		head, tail = diffLines, 0
	}
	if !collapse || len(lines) <= head+tail+1 {
		return lines[min(printed, len(lines)):], 0, -1
	}
	if printed < head {
		shown = append(shown, lines[printed:head]...)
	}
	marker = len(shown)
	shown = append(shown, "")
	shown = append(shown, lines[len(lines)-tail:]...)
	return shown, len(lines) - head - tail, marker
}

// liveLimit is how many lines of a tool's output stream live when
// collapsed.
func liveLimit(diff bool) int {
	if diff {
		return diffLines
	}
	return collapseLines
}

func compactJSON(s string) string {
	var b bytes.Buffer
	if json.Compact(&b, []byte(s)) != nil {
		return s
	}
	return b.String()
}

// clip cuts s to n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}
