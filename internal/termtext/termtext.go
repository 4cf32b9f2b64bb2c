// Package termtext makes text written for a terminal, or by a program
// nobody vouches for, safe to show: in penguin chat's output, and in the
// output tail of the process list that the web app shows.
package termtext

import (
	"strings"

	"github.com/charmbracelet/x/ansi"
)

// Clean makes untrusted text (what the model writes, what tools print,
// the arguments of calls, messages from servers) safe to print on a
// terminal: escape sequences are removed (they could clear the screen,
// retitle the window or write the clipboard), and so are control
// characters other than newline and tab (a carriage return could hide
// what came before it on the line).
func Clean(s string) string {
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	s = ansi.Strip(s)
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, s)
}

// isControl reports a control character other than newline and tab.
func isControl(r rune) bool {
	return r != '\n' && r != '\t' && (r < 0x20 || r == 0x7f || r >= 0x80 && r < 0xa0)
}
