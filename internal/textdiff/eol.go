package textdiff

import "strings"

// CRLF reports whether text ends its lines the Windows way: it has at
// least one "\n" and every "\n" follows a "\r". A text that mixes both
// endings is not CRLF, so that nothing is converted on a guess.
func CRLF(text string) bool {
	n := strings.Count(text, "\n")
	return n > 0 && strings.Count(text, "\r\n") == n
}

// ToCRLF turns every "\n" of s not already preceded by "\r" into "\r\n".
func ToCRLF(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + strings.Count(s, "\n"))
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' && (i == 0 || s[i-1] != '\r') {
			b.WriteByte('\r')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// ToLF turns every "\r\n" of s into "\n".
func ToLF(s string) string { return strings.ReplaceAll(s, "\r\n", "\n") }
