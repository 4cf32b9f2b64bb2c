// Package redact replaces vault values with their names in tool output, in
// whole strings and in streams whose chunks may split a value anywhere.
//
// Besides the value itself it looks for the forms a command produces with
// the everyday encoders, each replaced by the value's name as well:
//
//   - base64, standard and URL alphabets, with or without padding, at each
//     of the three byte alignments the value can have inside a longer
//     encoded text (`echo "token=$SECRET" | base64`): the characters that
//     depend on the value's bytes alone are matched;
//   - hexadecimal, lower, upper or mixed case (xxd -p, od, printf %x);
//   - URL encoding as the common encoders do it (RFC 3986, form encoding
//     with "+" for a space, encodeURIComponent, Go's query and path
//     escaping, every byte escaped), escapes in either case;
//   - the value reversed (rev), by character or by byte;
//   - any of the encoded forms broken by line breaks (base64 wraps at 76
//     columns, xxd -p at 60), and "\n" in a value printed as "\r\n" by a
//     terminal.
//
// A stream holds back the shortest tail that could still grow into one of
// these forms, at most MaxHold(longest form) bytes, so a value split across
// output deltas is still replaced.
//
// What it cannot catch, by construction: a value printed in pieces that do
// not follow each other (two halves on separate, unrelated lines, every
// other character), reversed line by line when the value holds a line
// break, or reversed and shorter than minEncoded characters, transformed (upper-cased, rot13, hashed,
// compressed, encrypted), or encoded in any other way (base32, octal
// escapes, JSON \u escapes, xxd's default dump with offsets between the
// bytes, od -x's swapped byte pairs), and encoded forms of values shorter
// than minEncoded characters once encoded. Redaction keeps honest output
// from leaking a secret by accident; it cannot stop a command that means to
// exfiltrate it.
//
// The matcher is written here rather than taken from a multi-pattern
// library because the forms need two things such libraries lack: ASCII
// case folding for some patterns only, and line breaks skipped inside
// encoded ones; the patterns per vault are few, indexed by their first
// byte.
package redact

import (
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"
)

// minEncoded is the shortest encoded form looked for: shorter ones would
// replace unrelated encoded text too often.
const minEncoded = 8

// maxBreak is the longest run of line-break bytes skipped inside an
// encoded form ("\r\r\n" is what a terminal makes of "\r\n").
const maxBreak = 4

// Vault knows the secret values to hide. A nil *Vault hides nothing, so
// callers need no special case for an empty vault.
type Vault struct {
	forms   []form     // longest first, so a longer secret wins over its own prefix
	first   [256][]int // the forms that can start with each byte
	pairs   pairSet    // the first two bytes a match can start with
	maxSpan int        // the most bytes of text one match can cover
}

// pairSet is a set of byte pairs: most positions of a text are passed over
// after one lookup in it.
type pairSet [1 << 16 / 64]uint64

func (p *pairSet) add(a, b byte) {
	i := int(a)<<8 | int(b)
	p[i/64] |= 1 << (i % 64)
}

func (p *pairSet) has(a, b byte) bool {
	i := int(a)<<8 | int(b)
	return p[i/64]&(1<<(i%64)) != 0
}

// cases returns the spellings of c a form matches: c alone, or both
// cases of a letter when it folds.
func cases(c byte, fold bool) []byte {
	if fold && lower(c) != upper(c) {
		return []byte{lower(c), upper(c)}
	}
	return []byte{c}
}

// form is one spelling of a value to find.
type form struct {
	text        string
	fold        bool // ASCII letters match in either case (hex digits, escapes)
	breaks      bool // line breaks may interrupt it (wrapped encoder output)
	replacement string
}

// New returns a Vault for the name → value map, or nil when no value is
// set. Empty values are ignored: they would match everywhere.
func New(vault map[string]string) *Vault {
	// The forms are gathered before the Vault is made: its tables take
	// 14 KiB, and most environments have no secrets.
	var found []form
	seen := map[string]bool{}
	for name, value := range vault {
		if value == "" {
			continue
		}
		for _, f := range forms(value) {
			key := f.text
			if f.fold {
				key = "\x00" + strings.ToLower(f.text)
			}
			if seen[key] {
				continue
			}
			seen[key] = true
			f.replacement = Replacement(name)
			found = append(found, f)
		}
	}
	if len(found) == 0 {
		return nil
	}
	v := &Vault{forms: found}
	sort.Slice(v.forms, func(i, j int) bool {
		if len(v.forms[i].text) != len(v.forms[j].text) {
			return len(v.forms[i].text) > len(v.forms[j].text)
		}
		return v.forms[i].text < v.forms[j].text
	})
	for i, f := range v.forms {
		for _, a := range cases(f.text[0], f.fold) {
			v.first[a] = append(v.first[a], i)
			if len(f.text) == 1 {
				for b := 0; b < 256; b++ {
					v.pairs.add(a, byte(b))
				}
				continue
			}
			seconds := cases(f.text[1], f.fold)
			if f.breaks {
				seconds = append(seconds, '\r', '\n')
			}
			if f.text[1] == '\n' {
				seconds = append(seconds, '\r')
			}
			for _, b := range seconds {
				v.pairs.add(a, b)
			}
		}
		v.maxSpan = max(v.maxSpan, MaxHold(len(f.text)))
	}
	return v
}

// MaxHold is the most text a match of a form of n bytes can cover, line
// breaks inside it included; a stream never holds back more than that of
// the longest form.
func MaxHold(n int) int { return n + maxBreak*(n-1) }

// MaxHeld is the most a Stream over v holds back at any time.
func (v *Vault) MaxHeld() int {
	if v == nil {
		return 0
	}
	return v.maxSpan
}

// forms returns the spellings of value to look for.
func forms(value string) []form {
	out := []form{{text: value}}
	add := func(f form) {
		if len(f.text) >= minEncoded && f.text != value {
			out = append(out, f)
		}
	}
	add(form{text: hex.EncodeToString([]byte(value)), fold: true, breaks: true})
	// URL encodings differ in what they leave unescaped and in how they
	// spell a space; they match in either case, for escapes like %2f.
	unreserved := func(c byte) bool {
		return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("-._~", c) >= 0
	}
	for _, esc := range []string{
		url.QueryEscape(value),
		url.PathEscape(value),
		percentEncode(value, unreserved, "%20"), // RFC 3986, Python's quote
		percentEncode(value, unreserved, "+"),   // forms, Python's quote_plus
		percentEncode(value, func(c byte) bool { return unreserved(c) || strings.IndexByte("!'()*", c) >= 0 }, "%20"), // encodeURIComponent
		percentEncode(value, func(byte) bool { return false }, "%20"),                                                 // every byte
	} {
		add(form{text: esc, fold: true})
	}
	// Reversed, as rev prints it: by character in a UTF-8 locale, by
	// byte in the C locale.
	add(form{text: reverseRunes(value)})
	add(form{text: reverseBytes(value)})
	for align := 0; align < 3; align++ {
		core := base64Core([]byte(value), align)
		add(form{text: core, breaks: true})
		add(form{text: strings.NewReplacer("+", "-", "/", "_").Replace(core), breaks: true})
	}
	return out
}

// reverseRunes returns s with its characters in reverse order.
func reverseRunes(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}

// reverseBytes returns s with its bytes in reverse order.
func reverseBytes(s string) string {
	b := []byte(s)
	slices.Reverse(b)
	return string(b)
}

// base64Core returns the base64 characters that value alone determines
// when it starts align bytes into a 3-byte group of a longer text: the
// characters whose six bits all come from value.
func base64Core(value []byte, align int) string {
	buf := make([]byte, align+len(value))
	copy(buf[align:], value)
	enc := base64.RawStdEncoding.EncodeToString(buf)
	from := (8*align + 5) / 6
	to := 8 * (align + len(value)) / 6
	if to <= from {
		return ""
	}
	return enc[from:to]
}

// percentEncode escapes every byte of s that keep refuses as %XX, and a
// space as space.
func percentEncode(s string, keep func(byte) bool, space string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case keep(c):
			b.WriteByte(c)
		case c == ' ':
			b.WriteString(space)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func upper(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func isBreak(c byte) bool { return c == '\n' || c == '\r' }

// Replacement is what a value named name becomes in output: the name in the
// spelling a shell command would use to read it, so the text stays useful.
func Replacement(name string) string { return "$" + name }

// String returns s with every vault value replaced by its name.
func (v *Vault) String(s string) string {
	if v == nil {
		return s
	}
	out, _ := v.scan(s, true)
	return out
}

// match outcomes.
const (
	none = iota
	full
	partial // the text ended while the form still matched
)

// matchAt tries f at text[i:] and returns the outcome and, for a full
// match, the end of the matched text.
func (f *form) matchAt(text string, i int) (int, int) {
	j := i
	for k := 0; k < len(f.text); k++ {
		want := f.text[k]
		if k > 0 && f.breaks {
			for n := 0; n < maxBreak && j < len(text) && isBreak(text[j]) && !isBreak(want); n++ {
				j++
			}
		}
		if want == '\n' {
			// A terminal prints "\n" as "\r\n".
			for n := 0; n < 2 && j < len(text) && text[j] == '\r'; n++ {
				j++
			}
		}
		if j == len(text) {
			return partial, 0
		}
		got := text[j]
		if got != want && !(f.fold && lower(got) == lower(want)) {
			return none, 0
		}
		j++
	}
	return full, j
}

// scan redacts text. When final is false it stops at the first position from
// which the rest of text could still grow into a secret, and returns that
// rest as held so the caller can retry once more text arrives.
func (v *Vault) scan(text string, final bool) (out, held string) {
	var b strings.Builder
	start := 0 // text[start:i] is copied verbatim when flushed
	for i := 0; i < len(text); {
		if i+1 < len(text) && !v.pairs.has(text[i], text[i+1]) {
			i++
			continue
		}
		candidates := v.first[text[i]]
		if len(candidates) == 0 {
			i++
			continue
		}
		matched, waiting := false, false
		for _, idx := range candidates {
			f := &v.forms[idx]
			outcome, end := f.matchAt(text, i)
			if outcome == full && waiting {
				break // a longer form may still match once more text comes
			}
			if outcome == full {
				if b.Cap() == 0 {
					b.Grow(len(text))
				}
				b.WriteString(text[start:i])
				b.WriteString(f.replacement)
				i, start = end, end
				matched = true
				break
			}
			if outcome == partial && !final {
				waiting = true
			}
		}
		if matched {
			continue
		}
		if waiting {
			if start == 0 {
				return text[:i], text[i:]
			}
			b.WriteString(text[start:i])
			return b.String(), text[i:]
		}
		i++
	}
	if start == 0 {
		return text, ""
	}
	b.WriteString(text[start:])
	return b.String(), ""
}

// Stream redacts text that arrives in chunks. It holds back the shortest
// tail that could be the beginning of a secret, so a value split across
// chunks is still replaced. It is not safe for concurrent use.
type Stream struct {
	v       *Vault
	pending string
}

// NewStream returns a Stream over v; a nil v passes text through.
func (v *Vault) NewStream() *Stream { return &Stream{v: v} }

// Write takes the next chunk and returns the text that is now safe to show.
func (s *Stream) Write(chunk string) string {
	if s.v == nil {
		return chunk
	}
	text := chunk
	if s.pending != "" {
		text = s.pending + chunk
	}
	out, held := s.v.scan(text, false)
	s.pending = held
	return out
}

// Flush returns whatever was held back, redacted, at the end of the stream.
func (s *Stream) Flush() string {
	if s.v == nil || s.pending == "" {
		return ""
	}
	out, _ := s.v.scan(s.pending, true)
	s.pending = ""
	return out
}
