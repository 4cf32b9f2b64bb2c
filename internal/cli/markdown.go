package cli

import (
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
	// The scan for block ends resumes where it stopped, so a long block
	// is not read again with every fragment: scanned is the length of buf
	// read so far (whole lines), cut the end of the last complete block,
	// inFence whether the scan is inside a code fence.
	scanned, cut int
	inFence      bool
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

// setWidth renders for width columns from now on, keeping what is
// pending.
func (m *markdown) setWidth(color bool, width int) {
	m.tr = newMarkdown(color, width).tr
}

// add appends a fragment and returns the rendering of the blocks it
// completed, or "".
func (m *markdown) add(fragment string) string {
	m.buf.WriteString(fragment)
	if !strings.Contains(fragment, "\n") {
		return ""
	}
	text := m.buf.String()
	m.scan(text)
	if m.cut == 0 {
		return ""
	}
	done, rest := text[:m.cut], text[m.cut:]
	m.buf.Reset()
	m.buf.WriteString(rest)
	m.scanned -= m.cut
	m.cut = 0
	return m.render(done)
}

// scan reads the whole lines of text after m.scanned and moves m.cut to
// the end of the last block they complete: a blank line outside a code
// fence, or a fence's closing line.
func (m *markdown) scan(text string) {
	for {
		nl := strings.IndexByte(text[m.scanned:], '\n')
		if nl < 0 {
			return
		}
		line := strings.TrimSpace(text[m.scanned : m.scanned+nl])
		m.scanned += nl + 1
		switch {
		case strings.HasPrefix(line, "```") || strings.HasPrefix(line, "~~~"):
			m.inFence = !m.inFence
			if !m.inFence {
				m.cut = m.scanned
			}
		case line == "" && !m.inFence:
			m.cut = m.scanned
		}
	}
}

// flush renders what is left.
func (m *markdown) flush() string {
	text := m.buf.String()
	m.buf.Reset()
	m.scanned, m.cut, m.inFence = 0, 0, false
	if strings.TrimSpace(text) == "" {
		return ""
	}
	return m.render(text)
}

// pending is the text not rendered yet.
func (m *markdown) pending() string { return m.buf.String() }

// trimPad cuts the padding Glamour writes to the end of each line of out
// (spaces, with or without styles), which only makes copied text untidy,
// ending a cut line with reset so no style runs on.
func trimPad(out, reset string) string {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		end := len(l)
		for end > 0 {
			if l[end-1] == ' ' {
				end--
				continue
			}
			// A style sequence: ESC [ digits and semicolons m.
			j := end - 1
			if l[j] != 'm' {
				break
			}
			for j > 0 && (l[j-1] == ';' || l[j-1] >= '0' && l[j-1] <= '9') {
				j--
			}
			if j < 2 || l[j-1] != '[' || l[j-2] != '\x1b' {
				break
			}
			end = j - 2
		}
		if end < len(l) {
			lines[i] = l[:end] + reset
		}
	}
	return strings.Join(lines, "\n")
}

func (m *markdown) render(text string) string {
	out, err := m.tr.Render(text)
	if err != nil {
		return text
	}
	return strings.Trim(trimPad(out, m.reset), "\n")
}
