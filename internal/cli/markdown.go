package cli

import (
	"strings"

	"github.com/penguin-agent/penguin/internal/termmd"
)

// markdown renders the model's text for a terminal. Text arrives in
// fragments; whole blocks (paragraphs, lists, fenced code) are rendered as
// soon as they are complete, so an answer appears as it is written without
// ever rendering half a code fence.
type markdown struct {
	tr  *termmd.Renderer
	buf strings.Builder
	// printed is set once a block of this answer is out: the next one
	// follows after a blank line, as blocks rendered together do.
	printed bool
	// The scan for block ends resumes where it stopped, so a long block
	// is not read again with every fragment: scanned is the length of buf
	// read so far (whole lines), cut the end of the last complete block,
	// inFence whether the scan is inside a code fence.
	scanned, cut int
	inFence      bool
}

// newMarkdown returns a renderer for width columns, with colours or, for a
// terminal without them, the plain layout that still sets out headings,
// lists and code.
func newMarkdown(color bool, width int) *markdown {
	return &markdown{tr: newLayout(color, width)}
}

func newLayout(color bool, width int) *termmd.Renderer {
	if width <= 0 {
		width = 80
	}
	return termmd.New(width, color)
}

// setWidth renders for width columns from now on, keeping what is
// pending.
func (m *markdown) setWidth(color bool, width int) {
	m.tr = newLayout(color, width)
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
	out := ""
	if strings.TrimSpace(text) != "" {
		out = m.render(text)
	}
	m.printed = false
	return out
}

// pending is the text not rendered yet.
func (m *markdown) pending() string { return m.buf.String() }

// render lays text out; blocks after the answer's first one start after
// a blank line.
func (m *markdown) render(text string) string {
	out := m.tr.Render(text)
	if out == "" {
		return ""
	}
	if m.printed {
		out = "\n" + out
	}
	m.printed = true
	return out
}
