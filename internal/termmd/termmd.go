// Package termmd lays out markdown for a terminal: the model's answers in
// `penguin chat` and `penguin run`. goldmark parses the text (CommonMark,
// with GitHub's tables, strikethrough and task lists, whose parsers are
// this package's: gfm.go says why); this package lays the parsed blocks
// out for a given width, with ANSI styles or, for a terminal without
// colour, as plain text.
//
// We write the layout ourselves rather than use a complete terminal
// renderer such as Glamour because of what such a renderer costs every
// process that links it. Go initialises every package of a binary when it
// starts, whichever subcommand runs, and Penguin is one binary: Glamour's
// syntax highlighter (Chroma) builds its two hundred lexers and its styles
// at init, with an HTML sanitiser and a CSS parser beside it. That was
// most of the package initialisation of `penguin serve` (5.2 MB of 8.2 MB
// and 70,000 of 93,000 allocations before main, docs/performance.md),
// paid by a server that never renders markdown. The constructs a chat shows are few (headings,
// emphasis, code, lists, quotes, links, tables, rules), and laying them
// out is this package. Code blocks are printed as written, not
// highlighted.
//
// Without colour, inline markup stays as written (**bold**, `code`),
// which is how emphasis reads in plain text; blocks are laid out the same
// either way. The input is expected to be free of escape sequences and
// control characters already (the CLI cleans what the model writes);
// character references that decode to a control character (&#27;) are
// replaced, so the layout adds none.
package termmd

import (
	"strconv"
	"strings"
	"unicode"

	"github.com/charmbracelet/x/ansi"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// Layout constants.
const (
	// margin is the indent of every line, and as much is left free at the
	// right: an answer stands apart from the labels around it.
	margin = "  "
	// minWidth is the narrowest a block is laid out, however deep it is
	// nested or however narrow the terminal: below it, text wraps a word
	// a line.
	minWidth = 20
	// codeIndent sets code blocks apart from the text around them.
	codeIndent = "  "
	// ruleWidth is the longest a thematic break is drawn.
	ruleWidth = 40
	// minColumn is the narrowest a table column is made to fit the width.
	minColumn = 6
)

// SGR parameters of the styles, used only with colour.
const (
	sgrBold      = "1"
	sgrDim       = "2"
	sgrItalic    = "3"
	sgrUnderline = "4"
	sgrStrike    = "9"
	sgrCode      = "36" // cyan
	sgrHeading   = "1;36"
)

// Renderer lays out markdown for one width, with or without colour. It is
// not safe for concurrent use.
type Renderer struct {
	parser parser.Parser
	width  int
	color  bool
}

// New returns a Renderer for a terminal width columns wide (at least
// minWidth plus the margins), with ANSI styles when color is set.
func New(width int, color bool) *Renderer {
	md := goldmark.New(goldmark.WithParserOptions(gfmOptions()...))
	return &Renderer{parser: md.Parser(), width: width, color: color}
}

// Render lays out src: every line indented by the margin, no line padded
// or ending in spaces, blocks apart by one blank line, no newline at the
// end.
func (r *Renderer) Render(src string) string {
	source := []byte(src)
	doc := r.parser.Parse(text.NewReader(source))
	l := &layout{src: source, color: r.color}
	lines := l.children(doc, r.width-2*len(margin), false)
	for i, line := range lines {
		if line = strings.TrimRight(line, " "); line != "" {
			line = margin + line
		}
		lines[i] = line
	}
	return strings.Join(lines, "\n")
}

// layout lays out the nodes of one parsed document.
type layout struct {
	src   []byte
	color bool
	// inCell is set while a table cell's text is laid out: a "\|" in a
	// code span there is the cell's pipe, not a column's end, and is shown
	// as "|" (GitHub's tables).
	inCell bool
}

// children lays out n's child blocks one under the other, with a blank
// line between them unless tight.
func (l *layout) children(n ast.Node, width int, tight bool) []string {
	var out []string
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		b := l.block(c, width)
		if len(b) == 0 {
			continue
		}
		if len(out) > 0 && !tight {
			out = append(out, "")
		}
		out = append(out, b...)
	}
	return out
}

// block lays out one block in lines of at most width columns (a longer
// word, a code line or a table too wide to shrink goes past it).
func (l *layout) block(n ast.Node, width int) []string {
	width = max(width, minWidth)
	switch n := n.(type) {
	case *ast.Heading:
		prefix := strings.Repeat("#", n.Level) + " "
		style := sgrBold
		if n.Level <= 2 {
			style = sgrHeading
		}
		lines := l.wrap(l.inline(n, style), width-len(prefix))
		return prefixed(lines, l.style(sgrDim, prefix[:n.Level])+" ", strings.Repeat(" ", len(prefix)))
	case *ast.Paragraph, *ast.TextBlock:
		return l.wrap(l.inline(n, ""), width)
	case *ast.ThematicBreak:
		return []string{l.style(sgrDim, strings.Repeat("─", min(width, ruleWidth)))}
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		return prefixed(l.rawLines(n), codeIndent, codeIndent)
	case *ast.HTMLBlock:
		lines := l.rawLines(n)
		if n.HasClosure() {
			lines = append(lines, strings.TrimRight(l.value(n.ClosureLine.Value(l.src)), "\n"))
		}
		return lines
	case *ast.Blockquote:
		bar := l.style(sgrDim, "│") + " "
		return prefixed(l.children(n, width-2, false), bar, bar)
	case *ast.List:
		return l.list(n, width)
	case *east.Table:
		return l.table(n, width)
	default:
		return l.children(n, width, false)
	}
}

// rawLines is the text of a code or HTML block, line by line, as written.
func (l *layout) rawLines(n ast.Node) []string {
	segs := n.Lines()
	out := make([]string, 0, segs.Len())
	for i := range segs.Len() {
		seg := segs.At(i)
		out = append(out, strings.TrimRight(l.value(seg.Value(l.src)), "\n"))
	}
	return out
}

// list lays out a list: each item's first line after its marker ("•", or
// the item's number, right-aligned), the rest under its text.
func (l *layout) list(n *ast.List, width int) []string {
	numWidth := 0
	if n.IsOrdered() {
		numWidth = len(strconv.Itoa(n.Start + n.ChildCount() - 1))
	}
	var out []string
	num := n.Start
	for item := n.FirstChild(); item != nil; item = item.NextSibling() {
		marker := "•"
		if n.IsOrdered() {
			s := strconv.Itoa(num)
			marker = strings.Repeat(" ", numWidth-len(s)) + s + string(n.Marker)
			num++
		}
		indent := strings.Repeat(" ", ansi.StringWidth(marker)+1)
		body := l.children(item, width-len(indent), n.IsTight)
		if len(body) == 0 {
			body = []string{""}
		}
		if len(out) > 0 && !n.IsTight {
			out = append(out, "")
		}
		out = append(out, prefixed(body, l.style(sgrDim, marker)+" ", indent)...)
	}
	return out
}

// table lays out a table with its columns aligned, the header apart from
// the rows by a rule. Columns wider than the width together are narrowed,
// widest first, and their cells wrapped.
func (l *layout) table(t *east.Table, width int) []string {
	var rows [][][]span
	for row := t.FirstChild(); row != nil; row = row.NextSibling() {
		style := ""
		if _, ok := row.(*east.TableHeader); ok {
			style = sgrBold
		}
		var cells [][]span
		l.inCell = true
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			cells = append(cells, l.inline(cell, style))
		}
		l.inCell = false
		rows = append(rows, cells)
	}
	cols := len(t.Alignments)
	colWidth := make([]int, cols)
	for _, cells := range rows {
		for i, c := range cells[:min(len(cells), cols)] {
			colWidth[i] = max(colWidth[i], spansWidth(c))
		}
	}
	const sepWidth = 3 // " │ "
	avail := width - sepWidth*(cols-1)
	for sum(colWidth) > avail {
		widest := 0
		for i, w := range colWidth {
			if w > colWidth[widest] {
				widest = i
			}
		}
		if colWidth[widest] <= minColumn {
			break
		}
		colWidth[widest]--
	}
	sep := " " + l.style(sgrDim, "│") + " "
	var out []string
	for r, cells := range rows {
		wrapped := make([][]string, cols)
		height := 1
		for i := range cols {
			if i < len(cells) {
				wrapped[i] = l.wrap(cells[i], colWidth[i])
			}
			height = max(height, len(wrapped[i]))
		}
		for k := range height {
			parts := make([]string, cols)
			for i := range cols {
				cell := ""
				if k < len(wrapped[i]) {
					cell = wrapped[i][k]
				}
				parts[i] = align(cell, colWidth[i], t.Alignments[i])
			}
			out = append(out, strings.Join(parts, sep))
		}
		if r == 0 {
			rule := make([]string, cols)
			for i, w := range colWidth {
				rule[i] = strings.Repeat("─", w)
			}
			out = append(out, l.style(sgrDim, strings.Join(rule, "─┼─")))
		}
	}
	return out
}

// align pads a laid-out cell to width columns as the column is aligned.
func align(cell string, width int, a east.Alignment) string {
	gap := max(width-ansi.StringWidth(cell), 0)
	switch a {
	case east.AlignRight:
		return strings.Repeat(" ", gap) + cell
	case east.AlignCenter:
		return strings.Repeat(" ", gap/2) + cell + strings.Repeat(" ", gap-gap/2)
	default:
		return cell + strings.Repeat(" ", gap)
	}
}

// span is a run of inline text in one style: SGR parameters joined by
// ";", or "" for none.
type span struct{ text, style string }

// hardBreak is the span of a hard line break.
var hardBreak = span{text: "\n"}

// inline flattens n's inline children into spans in style and the styles
// of the markup around them.
func (l *layout) inline(n ast.Node, style string) []span {
	var out []span
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		out = l.appendInline(out, c, style)
	}
	return out
}

func (l *layout) appendInline(out []span, n ast.Node, style string) []span {
	switch n := n.(type) {
	case *ast.Text:
		v := n.Segment.Value(l.src)
		if n.IsRaw() {
			out = append(out, span{l.value(v), style})
		} else {
			out = append(out, span{l.value(decode(v)), style})
		}
		if n.HardLineBreak() {
			out = append(out, hardBreak)
		} else if n.SoftLineBreak() {
			out = append(out, span{" ", style})
		}
	case *ast.String:
		v := n.Value
		if !n.IsRaw() && !n.IsCode() {
			v = decode(v)
		}
		out = append(out, span{l.value(v), style})
	case *ast.CodeSpan:
		var b strings.Builder
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			if t, ok := c.(*ast.Text); ok {
				b.WriteString(l.value(t.Segment.Value(l.src)))
				if t.SoftLineBreak() {
					b.WriteByte(' ')
				}
			} else if s, ok := c.(*ast.String); ok {
				b.WriteString(l.value(s.Value))
			}
		}
		code := b.String()
		if l.inCell {
			code = strings.ReplaceAll(code, `\|`, "|")
		}
		if l.color {
			out = append(out, span{code, join(style, sgrCode)})
		} else {
			out = append(out, span{"`" + code + "`", style})
		}
	case *ast.Emphasis:
		sgr, mark := sgrItalic, "*"
		if n.Level >= 2 {
			sgr, mark = sgrBold, "**"
		}
		out = l.marked(out, n, style, sgr, mark)
	case *east.Strikethrough:
		out = l.marked(out, n, style, sgrStrike, "~~")
	case *ast.Link:
		out = l.link(out, l.inline(n, join(style, sgrUnderline)), string(decode(n.Destination)), style)
	case *ast.AutoLink:
		out = append(out, span{l.value(n.Label(l.src)), join(style, sgrUnderline)})
	case *ast.Image:
		alt := append([]span{{"image: ", style}}, l.inline(n, style)...)
		out = l.link(out, alt, string(decode(n.Destination)), style)
	case *ast.RawHTML:
		for i := range n.Segments.Len() {
			seg := n.Segments.At(i)
			out = append(out, span{l.value(seg.Value(l.src)), style})
		}
	case *east.TaskCheckBox:
		box := "[ ] "
		if n.IsChecked {
			box = "[x] "
		}
		out = append(out, span{box, style})
	default:
		for c := n.FirstChild(); c != nil; c = c.NextSibling() {
			out = l.appendInline(out, c, style)
		}
	}
	return out
}

// marked appends n's children in style plus sgr with colour, or between
// their markup mark without.
func (l *layout) marked(out []span, n ast.Node, style, sgr, mark string) []span {
	if l.color {
		return append(out, l.inline(n, join(style, sgr))...)
	}
	out = append(out, span{mark, style})
	out = append(out, l.inline(n, style)...)
	return append(out, span{mark, style})
}

// link appends a link's text and then, unless the text is the address
// itself, its address in parentheses (dim with colour).
func (l *layout) link(out, label []span, dest, style string) []span {
	out = append(out, label...)
	dest = l.value([]byte(dest))
	var b strings.Builder
	for _, s := range label {
		b.WriteString(s.text)
	}
	if dest != "" && b.String() != dest {
		out = append(out, span{" ", style}, span{"(" + dest + ")", join(style, sgrDim)})
	}
	return out
}

// value is text from the document as it is printed: control characters
// (the input has none, but a decoded character reference may) replaced.
func (l *layout) value(v []byte) string {
	s := string(v)
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return unicode.ReplacementChar
		}
		return r
	}, s)
}

// isControl reports a control character other than newline and tab.
func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0)
}

// decode resolves backslash escapes and character references, as an HTML
// renderer would.
func decode(v []byte) []byte {
	return util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(v)))
}

// wrap lays spans out in lines of at most width columns, breaking at
// spaces and hard line breaks; a word wider than the width has a line of
// its own. Runs of spaces become one, in the style of the text around it
// (an underlined link stays underlined between its words).
func (l *layout) wrap(spans []span, width int) []string {
	var (
		lines      []string
		line, word []span
		lineWidth  int
		wordWidth  int
		spaceStyle string // the style of the space before word
	)
	endLine := func() {
		lines = append(lines, l.styled(line))
		line, lineWidth = line[:0], 0
	}
	endWord := func() {
		if len(word) == 0 {
			return
		}
		if lineWidth > 0 && lineWidth+1+wordWidth > width {
			endLine()
		}
		if lineWidth > 0 {
			line = appendSpan(line, span{" ", spaceStyle})
			lineWidth++
		}
		for _, s := range word {
			line = appendSpan(line, s)
		}
		lineWidth += wordWidth
		word, wordWidth = word[:0], 0
	}
	for _, s := range spans {
		if s == hardBreak {
			endWord()
			endLine()
			continue
		}
		rest := s.text
		for rest != "" {
			i := strings.IndexFunc(rest, isSpace)
			if i < 0 {
				i = len(rest)
			}
			if i > 0 {
				word = appendSpan(word, span{rest[:i], s.style})
				wordWidth += ansi.StringWidth(rest[:i])
			}
			if i == len(rest) {
				break
			}
			endWord()
			spaceStyle = s.style
			rest = rest[i+1:]
		}
	}
	endWord()
	if lineWidth > 0 || len(lines) == 0 {
		endLine()
	}
	return lines
}

// appendSpan appends s to spans, joined to the last one when they share a
// style.
func appendSpan(spans []span, s span) []span {
	if n := len(spans); n > 0 && spans[n-1].style == s.style {
		spans[n-1].text += s.text
		return spans
	}
	return append(spans, s)
}

// styled prints spans with their styles.
func (l *layout) styled(spans []span) string {
	var b strings.Builder
	for _, s := range spans {
		b.WriteString(l.style(s.style, s.text))
	}
	return b.String()
}

func isSpace(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }

// style wraps text in the SGR parameters sgr, with colour on.
func (l *layout) style(sgr, text string) string {
	if !l.color || sgr == "" || text == "" {
		return text
	}
	return "\x1b[" + sgr + "m" + text + "\x1b[0m"
}

// join adds SGR parameters to a style.
func join(style, sgr string) string {
	if style == "" {
		return sgr
	}
	return style + ";" + sgr
}

// prefixed puts first before the first line and rest before the others.
func prefixed(lines []string, first, rest string) []string {
	for i := range lines {
		if i == 0 {
			lines[i] = first + lines[i]
		} else {
			lines[i] = rest + lines[i]
		}
	}
	return lines
}

func spansWidth(spans []span) int {
	n := 0
	for _, s := range spans {
		n += ansi.StringWidth(s.text)
	}
	return n
}

func sum(xs []int) int {
	n := 0
	for _, x := range xs {
		n += x
	}
	return n
}
