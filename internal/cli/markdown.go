package cli

import (
	"regexp"
	"strings"

	"charm.land/glamour/v2"
)

// markdown renders the model's text for a terminal. Text arrives in
// fragments; whole blocks (paragraphs, lists, fenced code) are rendered as
// soon as they are complete, so an answer appears as it is written without
// ever rendering half a code fence.
type markdown struct {
	tr  *glamour.TermRenderer
	buf strings.Builder
	// reset ends a line whose padding was cut, so no style runs on.
	reset string
}

// newMarkdown returns a renderer for width columns, with colours or, for a
// terminal without them, the plain style that still lays out headings,
// lists and code.
func newMarkdown(color bool, width int) *markdown {
	if width <= 0 {
		width = 80
	}
	style := "notty"
	if color {
		style = "dark"
	}
	tr, err := glamour.NewTermRenderer(glamour.WithStandardStyle(style), glamour.WithWordWrap(width-2))
	if err != nil {
		// The styles are built in: this cannot fail.
		panic(err)
	}
	m := &markdown{tr: tr}
	if color {
		m.reset = styleReset
	}
	return m
}

// add appends a fragment and returns the rendering of the blocks it
// completed, or "".
func (m *markdown) add(fragment string) string {
	m.buf.WriteString(fragment)
	text := m.buf.String()
	cut := completeBlocks(text)
	if cut == 0 {
		return ""
	}
	m.buf.Reset()
	m.buf.WriteString(text[cut:])
	return m.render(text[:cut])
}

// flush renders what is left.
func (m *markdown) flush() string {
	text := m.buf.String()
	m.buf.Reset()
	if strings.TrimSpace(text) == "" {
		return ""
	}
	return m.render(text)
}

// pending is the text not rendered yet.
func (m *markdown) pending() string { return m.buf.String() }

// trailingPad matches the padding Glamour writes to the end of each line
// (spaces, with or without styles), which only makes copied text untidy.
var trailingPad = regexp.MustCompile(`(?m)(?:\x1b\[[0-9;]*m| )+$`)

func (m *markdown) render(text string) string {
	out, err := m.tr.Render(text)
	if err != nil {
		return text
	}
	return strings.Trim(trailingPad.ReplaceAllString(out, m.reset), "\n")
}

// completeBlocks returns the length of the longest prefix of text that ends
// at a blank line outside a code fence, or 0.
func completeBlocks(text string) int {
	cut, inFence, pos := 0, false, 0
	for _, line := range strings.SplitAfter(text, "\n") {
		pos += len(line)
		if !strings.HasSuffix(line, "\n") {
			break
		}
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			inFence = !inFence
			if !inFence {
				cut = pos
			}
		case trimmed == "" && !inFence:
			cut = pos
		}
	}
	return cut
}
