package termmd

// GitHub's tables, strikethrough and task lists, parsed into goldmark's
// extension nodes (github.com/yuin/goldmark/extension/ast) by this
// package rather than by goldmark's extension package, which is not
// imported. That package compiles eight regular expressions and builds
// its HTML attribute filters at init (2,049 allocations, 264 KB, its
// linkify patterns with their {1,256} repeats the costliest), in every
// Penguin process, a server included, though only the chat lays out
// markdown (docs/performance.md, eleventh round). What is here follows
// that package's parsers (goldmark, MIT License, Copyright (c) 2019
// Yusuke Inuzuka), without their regular expressions and without the
// HTML renderers a terminal does not need.

import (
	"bytes"

	gast "github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// gfmOptions are the parser options of the three extensions, with the
// priorities goldmark's extension package gives them: the task check box
// before links (which also start at "["), strikethrough after the
// built-in inline parsers, tables before other paragraph transformers.
func gfmOptions() []parser.Option {
	return []parser.Option{
		parser.WithParagraphTransformers(util.Prioritized(tableTransformer{}, 200)),
		parser.WithInlineParsers(
			util.Prioritized(strikethroughParser{}, 500),
			util.Prioritized(taskCheckBoxParser{}, 0),
		),
	}
}

// tableTransformer turns a paragraph whose second or later line is a
// delimiter row ("|:--|--:|") into a table: the line before is its
// header, the lines after its rows, the lines before the header stay a
// paragraph.
type tableTransformer struct{}

func (tableTransformer) Transform(node *gast.Paragraph, reader text.Reader, pc parser.Context) {
	ppos := node.Pos()
	lines := node.Lines()
	if lines.Len() < 2 {
		return
	}
	for i := 1; i < lines.Len(); i++ {
		delim := lines.At(i)
		alignments := tableDelimiter(delim.Value(reader.Source()))
		if alignments == nil {
			continue
		}
		header := tableRow(lines.At(i-1), alignments, true, reader.Source())
		if header == nil || len(alignments) != header.ChildCount() {
			return
		}
		table := east.NewTable()
		table.Alignments = alignments
		table.SetPos(ppos)
		table.AppendChild(table, east.NewTableHeader(header))
		for j := i + 1; j < lines.Len(); j++ {
			table.AppendChild(table, tableRow(lines.At(j), alignments, false, reader.Source()))
		}
		node.Lines().SetSliced(0, i-1)
		node.Parent().InsertAfter(node.Parent(), node, table)
		if node.Lines().Len() == 0 {
			node.Parent().RemoveChild(node.Parent(), node)
		} else {
			last := node.Lines().At(i - 2)
			last.Stop-- // the paragraph's last line without its newline
			node.Lines().Set(i-2, last)
		}
	}
}

// tableRow splits a row into its cells at the pipes that are not escaped
// ("\|"). A header keeps every cell; a body row drops cells beyond the
// header's and is filled up to as many. A "\|" inside a code span is a
// pipe in the cell's text: the layout takes the backslash out
// (layout.inCell).
func tableRow(segment text.Segment, alignments []east.Alignment, isHeader bool, source []byte) *east.TableRow {
	npos := segment
	segment = segment.TrimLeftSpace(source)
	segment = segment.TrimRightSpace(source)
	line := segment.Value(source)
	pos, limit := 0, len(line)
	row := east.NewTableRow(alignments)
	row.SetPos(npos.Start)
	if len(line) > 0 && line[pos] == '|' {
		pos++
	}
	if len(line) > 0 && line[limit-1] == '|' {
		limit--
	}
	i := 0
	for ; pos < limit; i++ {
		alignment := east.AlignNone
		if i >= len(alignments) {
			if !isHeader {
				return row
			}
		} else {
			alignment = alignments[i]
		}
		cell := east.NewTableCell()
		cell.SetPos(npos.Start + pos - npos.Padding)
		cell.Alignment = alignment
		closure := pos
		for ; closure < limit; closure++ {
			if line[closure] == '|' && (closure == 0 || line[closure-1] != '\\') {
				break
			}
		}
		seg := text.NewSegment(segment.Start+pos, segment.Start+closure)
		seg = seg.TrimLeftSpace(source)
		cell.Lines().Append(seg.TrimRightSpace(source))
		row.AppendChild(row, cell)
		pos = closure + 1
	}
	for ; i < len(alignments); i++ {
		row.AppendChild(row, east.NewTableCell())
	}
	return row
}

// tableDelimiter returns the alignments of a delimiter row, or nil when
// line is not one: indented at most three columns, only spaces, dashes,
// pipes and colons, not dashes alone, and every column ":--", "--:",
// ":--:" or "--".
func tableDelimiter(line []byte) []east.Alignment {
	if w, _ := util.IndentWidth(line, 0); w > 3 {
		return nil
	}
	allDashes := true
	for _, b := range line {
		if b != '-' {
			allDashes = false
		}
		if !util.IsSpace(b) && b != '-' && b != '|' && b != ':' {
			return nil
		}
	}
	if allDashes {
		return nil
	}
	cols := bytes.Split(line, []byte{'|'})
	if util.IsBlank(cols[0]) {
		cols = cols[1:]
	}
	if len(cols) > 0 && util.IsBlank(cols[len(cols)-1]) {
		cols = cols[:len(cols)-1]
	}
	var alignments []east.Alignment
	for _, col := range cols {
		col = bytes.Trim(col, " \t\n\f\r") // \s of the patterns goldmark matched columns with
		left, right := bytes.HasPrefix(col, []byte{':'}), bytes.HasSuffix(col, []byte{':'})
		dashes := col
		if left {
			dashes = dashes[1:]
		}
		if right && len(dashes) > 0 {
			dashes = dashes[:len(dashes)-1]
		}
		if len(dashes) == 0 || len(bytes.Trim(dashes, "-")) != 0 {
			return nil
		}
		switch {
		case left && right:
			alignments = append(alignments, east.AlignCenter)
		case left:
			alignments = append(alignments, east.AlignLeft)
		case right:
			alignments = append(alignments, east.AlignRight)
		default:
			alignments = append(alignments, east.AlignNone)
		}
	}
	return alignments
}

// strikethroughParser reads "~" and "~~" runs as delimiters of
// strikethrough; longer runs, and a run after a "~", are text.
type strikethroughParser struct{}

func (strikethroughParser) Trigger() []byte { return []byte{'~'} }

func (strikethroughParser) Parse(parent gast.Node, block text.Reader, pc parser.Context) gast.Node {
	before := block.PrecendingCharacter()
	line, segment := block.PeekLine()
	node := parser.ScanDelimiter(line, before, 1, strikethroughDelimiter{})
	if node == nil || node.OriginalLength > 2 || before == '~' {
		return nil
	}
	node.Segment = segment.WithStop(segment.Start + node.OriginalLength)
	block.Advance(node.OriginalLength)
	pc.PushDelimiter(node)
	return node
}

func (strikethroughParser) CloseBlock(gast.Node, parser.Context) {}

// strikethroughDelimiter pairs "~" runs into strikethrough nodes.
type strikethroughDelimiter struct{}

func (strikethroughDelimiter) IsDelimiter(b byte) bool { return b == '~' }

func (strikethroughDelimiter) CanOpenCloser(opener, closer *parser.Delimiter) bool {
	return opener.Char == closer.Char
}

func (strikethroughDelimiter) OnMatch(int) gast.Node { return east.NewStrikethrough() }

// taskCheckBoxParser reads "[ ]" or "[x]" at the start of a list item's
// first line as a check box.
type taskCheckBoxParser struct{}

func (taskCheckBoxParser) Trigger() []byte { return []byte{'['} }

func (taskCheckBoxParser) Parse(parent gast.Node, block text.Reader, pc parser.Context) gast.Node {
	// The check box is the first thing in the first block of a list item.
	if parent.Parent() == nil || parent.Parent().FirstChild() != parent || parent.HasChildren() {
		return nil
	}
	if _, ok := parent.Parent().(*gast.ListItem); !ok {
		return nil
	}
	line, _ := block.PeekLine()
	if len(line) < 3 || line[0] != '[' || line[2] != ']' {
		return nil
	}
	mark := line[1]
	if mark != 'x' && mark != 'X' && !isRegexpSpace(mark) {
		return nil
	}
	n := 3
	for n < len(line) && isRegexpSpace(line[n]) {
		n++
	}
	block.Advance(n)
	return east.NewTaskCheckBox(mark == 'x' || mark == 'X')
}

func (taskCheckBoxParser) CloseBlock(gast.Node, parser.Context) {}

// isRegexpSpace is the class \s of Go's regular expressions, which the
// task list's pattern was written with.
func isRegexpSpace(b byte) bool {
	return b == ' ' || b == '\t' || b == '\n' || b == '\f' || b == '\r'
}
