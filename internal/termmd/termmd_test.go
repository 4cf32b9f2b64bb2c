package termmd_test

import (
	"strings"
	"testing"

	"github.com/charmbracelet/x/ansi"

	"github.com/penguin-agent/penguin/internal/termmd"
)

// TestPlainLayout lays out each construct without colour: blocks set out,
// inline markup as written.
func TestPlainLayout(t *testing.T) {
	t.Parallel()
	cases := []struct{ name, src, want string }{
		{"heading and paragraph", "# Plan\n\nSome **bold** and *em* and `code` and ~~gone~~.\n",
			"  # Plan\n\n  Some **bold** and *em* and `code` and ~~gone~~."},
		{"soft break joins, hard break keeps", "one\ntwo  \nthree\n", "  one two\n  three"},
		{"links", "[docs](https://example.test/d) and <https://example.test/a> and [https://x.test](https://x.test)\n",
			"  docs (https://example.test/d) and https://example.test/a\n  and https://x.test"},
		{"image", "![a cat](cat.png)\n", "  image: a cat (cat.png)"},
		{"bullets, nested, tight", "- one\n- two\n  - nested\n", "  • one\n  • two\n    • nested"},
		{"loose list", "- one\n\n- two\n", "  • one\n\n  • two"},
		{"numbers aligned", "9. nine\n10. ten\n", "   9. nine\n  10. ten"},
		{"task list", "- [ ] open\n- [x] done\n", "  • [ ] open\n  • [x] done"},
		{"quote", "> said\n>\n> twice\n", "  │ said\n  │\n  │ twice"},
		{"fenced code as written", "```go\nfunc f() {\n\treturn\n}\n```\n", "    func f() {\n    \treturn\n    }"},
		{"indented code", "    x := 1\n", "    x := 1"},
		{"rule", "a\n\n---\n\nb\n", "  a\n\n  " + strings.Repeat("─", 40) + "\n\n  b"},
		{"table aligned", "| name | n |\n|:--|--:|\n| a | 10 |\n| long name | 2 |\n",
			"  name      │  n\n  ──────────┼───\n  a         │ 10\n  long name │  2"},
		{"table with escaped pipes, in code too", "| a | b |\n|---|:-:|\n| `x \\| y` | z \\| w |\n| 1 |\n",
			"  a       │   b\n  ────────┼──────\n  `x | y` │ z | w\n  1       │"},
		{"one or two tildes strike, three do not", "~one~ ~~two~~ ~~~three~~~\n", "  ~~one~~ ~~two~~ ~~~three~~~"},
		{"task boxes only at an item's start", "- [X] done\n- text [ ] mid\n- [] none\n", "  • [x] done\n  • text [ ] mid\n  • [] none"},
		{"escapes and references", "\\*not em\\* &amp; &copy; &#65;\n", "  *not em* & © A"},
		{"html block as written", "<div>\nhi\n</div>\n", "  <div>\n  hi\n  </div>"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := termmd.New(60, false).Render(c.src); got != c.want {
				t.Errorf("got\n%s\n%q\nwant\n%s\n%q", got, got, c.want, c.want)
			}
		})
	}
}

// TestColorStyles: with colour, inline markup becomes styles and no
// markup characters are left; without, there is not one escape sequence.
func TestColorStyles(t *testing.T) {
	t.Parallel()
	src := "## Plan\n\nSome **bold** and *em* and `code` and ~~gone~~, a [link](https://example.test).\n\n- item\n"
	got := termmd.New(80, true).Render(src)
	for _, want := range []string{"\x1b[2m##\x1b[0m \x1b[1;36mPlan\x1b[0m", "\x1b[1mbold\x1b[0m", "\x1b[3mem\x1b[0m", "\x1b[36mcode\x1b[0m",
		"\x1b[9mgone\x1b[0m", "\x1b[4mlink\x1b[0m", "\x1b[2m(https://example.test)\x1b[0m", "\x1b[2m•\x1b[0m item"} {
		if !strings.Contains(got, want) {
			t.Errorf("lacks %q:\n%q", want, got)
		}
	}
	if s := ansi.Strip(got); strings.ContainsAny(s, "*`~") {
		t.Errorf("markup left with colour:\n%s", s)
	}
	if plain := termmd.New(80, false).Render(src); strings.Contains(plain, "\x1b") {
		t.Errorf("an escape sequence without colour:\n%q", plain)
	}
}

// TestStylesStayOnTheirLine: a style that spans a wrap ends on each line
// and starts again on the next, so the margin and the next block are never
// styled; the space inside an underlined link is underlined too.
func TestStylesStayOnTheirLine(t *testing.T) {
	t.Parallel()
	got := termmd.New(24, true).Render("**one two three four five six seven**\n")
	for _, line := range strings.Split(got, "\n") {
		if !strings.HasPrefix(line, "  \x1b[1m") || !strings.HasSuffix(line, "\x1b[0m") {
			t.Errorf("line %q is not styled on its own", line)
		}
	}
	if got := termmd.New(80, true).Render("[two words](https://example.test)\n"); !strings.Contains(got, "\x1b[4mtwo words\x1b[0m") {
		t.Errorf("link text split: %q", got)
	}
}

// TestWraps: text wraps at the width less the margins, wide characters
// counted as two columns, and a word wider than a line has one of its own.
func TestWraps(t *testing.T) {
	t.Parallel()
	long := "https://example.test/" + strings.Repeat("x", 60)
	src := strings.Repeat("word ", 30) + "\n\n" + strings.Repeat("漢字 ", 20) + "\n\nsee " + long + " now\n"
	for _, color := range []bool{false, true} {
		got := termmd.New(40, color).Render(src)
		for _, line := range strings.Split(got, "\n") {
			if w := ansi.StringWidth(line); w > 38 && !strings.Contains(line, long) {
				t.Errorf("color %v: line of %d columns: %q", color, w, line)
			}
		}
		if !strings.Contains(got, "\n  see\n  "+long+"\n  now") && !strings.Contains(ansi.Strip(got), "\n  see\n  "+long+"\n  now") {
			t.Errorf("color %v: the long word is not on a line of its own:\n%s", color, got)
		}
	}
}

// TestTableNarrowed: a table wider than the width has its widest columns
// narrowed and their cells wrapped, rows kept aligned.
func TestTableNarrowed(t *testing.T) {
	t.Parallel()
	src := "| key | description |\n|---|---|\n| a | " + strings.Repeat("very long text ", 8) + "|\n| 漢字 | short |\n"
	got := termmd.New(40, false).Render(src)
	lines := strings.Split(got, "\n")
	if len(lines) < 6 {
		t.Fatalf("cells not wrapped:\n%s", got)
	}
	bar := -1
	for _, line := range lines {
		if w := ansi.StringWidth(line); w > 38 {
			t.Errorf("line of %d columns: %q", w, line)
		}
		i := strings.IndexAny(line, "│┼")
		if i < 0 {
			t.Fatalf("a row without its column rule: %q", line)
		}
		col := ansi.StringWidth(line[:i])
		if bar >= 0 && col != bar {
			t.Errorf("columns not aligned (%d, then %d):\n%s", bar, col, got)
		}
		bar = col
	}
}

// TestNoControlCharacters: a character reference to a control character
// (an escape sequence spelt &#27;) reaches the terminal as a replacement
// character, in text, code, links and tables alike.
func TestNoControlCharacters(t *testing.T) {
	t.Parallel()
	src := "&#27;[2J &#x9b;31m\n\n[x](&#27;]52;c;AAAA&#7;)\n\n| a |\n|---|\n| &#27;[H |\n"
	for _, color := range []bool{false, true} {
		got := ansi.Strip(termmd.New(60, color).Render(src)) // the styles' own sequences out
		if i := strings.IndexFunc(got, func(r rune) bool { return r < 0x20 && r != '\n' || r >= 0x7f && r < 0xa0 }); i >= 0 {
			t.Errorf("color %v: control character %q in:\n%q", color, got[i], got)
		}
		if !strings.Contains(got, "\uFFFD[2J") {
			t.Errorf("color %v: the reference is not replaced:\n%q", color, got)
		}
	}
}

// TestNoPadding: no line ends in a space, in any construct, so copied text
// is tidy.
func TestNoPadding(t *testing.T) {
	t.Parallel()
	src := "# H\n\n> q\n>\n> r\n\n| a | b |\n|---|:-:|\n| 1 |  |\n| long | 2 |\n\n- \n- x\n"
	for _, color := range []bool{false, true} {
		got := termmd.New(60, color).Render(src)
		for _, line := range strings.Split(ansi.Strip(got), "\n") {
			if strings.HasSuffix(line, " ") {
				t.Errorf("color %v: padded line %q", color, line)
			}
		}
	}
}
