package openai

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// decode decodes data into c, which reset has emptied, exactly as
// encoding/json would, for the chunks it knows how to read: a JSON object
// whose keys are the chunk's fields as they are spelt or fields it does
// not read, each field's value of the field's type (or null), no key
// twice. It reports false for anything else, valid or not (an error
// object, a key that differs from a field's name only in case, a number
// where a string goes, a value nested deeper than maxDepth, bytes that
// are not JSON); c is then in no defined state, and the caller resets it
// and decodes with encoding/json, whose result or error stands. The JSON
// of every chunk is checked as encoding/json's scanner checks it,
// including the values skipped. It exists because encoding/json scanned
// each chunk twice (for its end, then to decode it) through reflection,
// and matched every key it skipped against the fields: 40% of what a
// model call cost the llm service, for a few hundred bytes a chunk.
func (c *chunk) decode(data []byte) bool {
	l := lexer{b: data}
	l.space()
	var seen fields
	ok := l.object(func(key []byte) bool {
		switch string(key) {
		case "choices":
			if !seen.first(0) {
				return false
			}
			return l.choices(c)
		case "usage":
			if !seen.first(1) {
				return false
			}
			if l.null() {
				c.Usage = nil
				return true
			}
			c.Usage = new(usage)
			return l.usage(c.Usage)
		case "error":
			if !seen.first(2) || !l.null() {
				return false // an error chunk: rare, left to encoding/json
			}
			c.Error = nil
			return true
		}
		return l.skipUnread(key, "choices", "usage", "error")
	})
	if !ok {
		return false
	}
	l.space()
	return l.i == len(l.b)
}

// choices decodes the choices array into c.Choices.
func (l *lexer) choices(c *chunk) bool { return objects(l, &c.Choices, l.choice) }

// objects decodes an array of objects into list (null empties it),
// reusing its elements as encoding/json does (reset zeroed them), each
// element decoded by each.
func objects[T any](l *lexer, list *[]T, each func(*T) bool) bool {
	if l.null() {
		*list = nil
		return true
	}
	if !l.open('[') {
		return false
	}
	s := (*list)[:0]
	ok := l.elements(func() bool {
		if l.peek() != '{' {
			return false
		}
		if len(s) < cap(s) {
			s = s[:len(s)+1]
		} else {
			var zero T
			s = append(s, zero)
		}
		return each(&s[len(s)-1])
	})
	*list = s
	l.depth--
	return ok
}

func (l *lexer) choice(ch *choice) bool {
	var seen fields
	return l.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			return seen.first(0) && l.intInto(&ch.Index)
		case "delta":
			if !seen.first(1) {
				return false
			}
			if l.null() {
				return true // encoding/json leaves a struct as it is
			}
			return l.delta(ch)
		case "finish_reason":
			if !seen.first(2) {
				return false
			}
			if l.null() {
				ch.FinishReason = nil
				return true
			}
			s, ok := l.string()
			if ok {
				ch.FinishReason = &s
			}
			return ok
		}
		return l.skipUnread(key, "index", "delta", "finish_reason")
	})
}

func (l *lexer) delta(ch *choice) bool {
	d := &ch.Delta
	var seen fields
	return l.object(func(key []byte) bool {
		switch string(key) {
		case "content":
			// Its own UnmarshalJSON takes any value, as it does under
			// encoding/json.
			raw, ok := l.value()
			return ok && seen.first(0) && d.Content.UnmarshalJSON(raw) == nil
		case "reasoning":
			raw, ok := l.value()
			return ok && seen.first(1) && d.Reasoning.UnmarshalJSON(raw) == nil
		case "reasoning_content":
			return seen.first(2) && l.stringInto(&d.ReasoningContent)
		case "tool_calls":
			return seen.first(3) && l.toolCalls(d)
		}
		return l.skipUnread(key, "content", "reasoning", "reasoning_content", "tool_calls")
	})
}

func (l *lexer) toolCalls(d *delta) bool { return objects(l, &d.ToolCalls, l.toolCall) }

func (l *lexer) toolCall(tc *toolCallDelta) bool {
	var seen fields
	return l.object(func(key []byte) bool {
		switch string(key) {
		case "index":
			if !seen.first(0) {
				return false
			}
			if l.null() {
				tc.Index = nil
				return true
			}
			var n int
			if !l.intInto(&n) {
				return false
			}
			tc.Index = &n
			return true
		case "id":
			return seen.first(1) && l.stringInto(&tc.ID)
		case "function":
			if !seen.first(2) {
				return false
			}
			if l.null() {
				return true
			}
			var fseen fields
			return l.object(func(key []byte) bool {
				switch string(key) {
				case "name":
					return fseen.first(0) && l.stringInto(&tc.Function.Name)
				case "arguments":
					return fseen.first(1) && l.stringInto(&tc.Function.Arguments)
				}
				return l.skipUnread(key, "name", "arguments")
			})
		}
		return l.skipUnread(key, "index", "id", "function")
	})
}

func (l *lexer) usage(u *usage) bool {
	var seen fields
	return l.object(func(key []byte) bool {
		switch string(key) {
		case "prompt_tokens":
			return seen.first(0) && l.int64Into(&u.PromptTokens)
		case "completion_tokens":
			return seen.first(1) && l.int64Into(&u.CompletionTokens)
		case "total_tokens":
			return seen.first(2) && l.int64Into(&u.TotalTokens)
		case "prompt_cache_hit_tokens":
			return seen.first(3) && l.int64Into(&u.PromptCacheHit)
		case "prompt_tokens_details":
			if !seen.first(4) {
				return false
			}
			if l.null() {
				u.PromptTokensDetails = nil
				return true
			}
			u.PromptTokensDetails = &struct {
				CachedTokens     int64 `json:"cached_tokens"`
				CacheWriteTokens int64 `json:"cache_write_tokens"`
			}{}
			p := u.PromptTokensDetails
			var pseen fields
			return l.object(func(key []byte) bool {
				switch string(key) {
				case "cached_tokens":
					return pseen.first(0) && l.int64Into(&p.CachedTokens)
				case "cache_write_tokens":
					return pseen.first(1) && l.int64Into(&p.CacheWriteTokens)
				}
				return l.skipUnread(key, "cached_tokens", "cache_write_tokens")
			})
		case "completion_tokens_details":
			if !seen.first(5) {
				return false
			}
			if l.null() {
				u.CompletionTokensDetails = nil
				return true
			}
			u.CompletionTokensDetails = &struct {
				ReasoningTokens int64 `json:"reasoning_tokens"`
			}{}
			p := u.CompletionTokensDetails
			var pseen fields
			return l.object(func(key []byte) bool {
				if string(key) == "reasoning_tokens" {
					return pseen.first(0) && l.int64Into(&p.ReasoningTokens)
				}
				return l.skipUnread(key, "reasoning_tokens")
			})
		}
		return l.skipUnread(key, "prompt_tokens", "completion_tokens", "total_tokens", "prompt_cache_hit_tokens",
			"prompt_tokens_details", "completion_tokens_details")
	})
}

// fields records which of an object's fields were decoded, so that a key
// sent twice (which encoding/json merges into what the first one set)
// goes to encoding/json.
type fields uint8

// first marks field i and reports whether it was not marked before.
func (f *fields) first(i uint) bool {
	if *f&(1<<i) != 0 {
		return false
	}
	*f |= 1 << i
	return true
}

// maxDepth is how deep a chunk's values may nest on the short way:
// encoding/json takes deeper ones, up to its own limit.
const maxDepth = 64

// lexer reads one JSON text, checking it as encoding/json's scanner
// does: the grammar of RFC 8259, strings without control characters and
// with valid escapes (any other bytes, invalid UTF-8 included, pass).
type lexer struct {
	b     []byte
	i     int
	depth int
}

// space skips white space.
func (l *lexer) space() {
	for l.i < len(l.b) {
		switch l.b[l.i] {
		case ' ', '\t', '\n', '\r':
			l.i++
		default:
			return
		}
	}
}

// peek is the next byte after white space, or 0 at the end.
func (l *lexer) peek() byte {
	l.space()
	if l.i < len(l.b) {
		return l.b[l.i]
	}
	return 0
}

// open consumes c (a '[' or '{') and enters it.
func (l *lexer) open(c byte) bool {
	if l.peek() != c || l.depth >= maxDepth {
		return false
	}
	l.i++
	l.depth++
	return true
}

// null consumes a null if one is next.
func (l *lexer) null() bool {
	if l.peek() == 'n' && len(l.b)-l.i >= 4 && string(l.b[l.i:l.i+4]) == "null" {
		l.i += 4
		return true
	}
	return false
}

// object reads an object, calling each with every key (its bytes as
// they are: a key with an escape or non-ASCII byte ends the short way,
// since encoding/json would unescape and fold it), the lexer before the
// key's value, which each must consume.
func (l *lexer) object(each func(key []byte) bool) bool {
	if !l.open('{') {
		return false
	}
	ok := l.members(each)
	l.depth--
	return ok
}

// members reads an object's members after its '{', through its '}'.
func (l *lexer) members(each func(key []byte) bool) bool {
	if l.peek() == '}' {
		l.i++
		return true
	}
	for {
		if l.peek() != '"' {
			return false
		}
		start := l.i
		plain, ok := l.skipString()
		if !ok || !plain {
			return false
		}
		key := l.b[start+1 : l.i-1]
		if l.peek() != ':' {
			return false
		}
		l.i++
		if !each(key) {
			return false
		}
		switch l.peek() {
		case ',':
			l.i++
		case '}':
			l.i++
			return true
		default:
			return false
		}
	}
}

// elements reads the elements of an array whose '[' open consumed,
// through its ']', calling each before every element, which it must
// consume. The caller leaves the array's depth.
func (l *lexer) elements(each func() bool) bool {
	if l.peek() == ']' {
		l.i++
		return true
	}
	for {
		if !each() {
			return false
		}
		switch l.peek() {
		case ',':
			l.i++
		case ']':
			l.i++
			return true
		default:
			return false
		}
	}
}

// skipUnread skips the value of a key that is none of names, the fields
// of the object, which are ASCII. A key equal to one of them but for case
// is a field to encoding/json, which matches keys without regard to case.
func (l *lexer) skipUnread(key []byte, names ...string) bool {
	for _, n := range names {
		if equalFoldASCII(key, n) {
			return false
		}
	}
	_, ok := l.value()
	return ok
}

// equalFoldASCII reports whether the ASCII key equals name but for case.
func equalFoldASCII(key []byte, name string) bool {
	if len(key) != len(name) {
		return false
	}
	for i := range len(key) {
		a, b := key[i], name[i]
		if 'A' <= a && a <= 'Z' {
			a += 'a' - 'A'
		}
		if 'A' <= b && b <= 'Z' {
			b += 'a' - 'A'
		}
		if a != b {
			return false
		}
	}
	return true
}

// value skips any value, checking it, and returns its bytes.
func (l *lexer) value() ([]byte, bool) {
	switch c := l.peek(); {
	case c == '"':
		start := l.i
		_, ok := l.skipString()
		return l.b[start:l.i], ok
	case c == '{' || c == '[':
		start := l.i
		ok := l.skipComposite()
		return l.b[start:l.i], ok
	case c == '-' || ('0' <= c && c <= '9'):
		start := l.i
		ok := l.number()
		return l.b[start:l.i], ok
	case c == 't':
		return l.literal("true")
	case c == 'f':
		return l.literal("false")
	case c == 'n':
		return l.literal("null")
	}
	return nil, false
}

func (l *lexer) literal(word string) ([]byte, bool) {
	if len(l.b)-l.i < len(word) || string(l.b[l.i:l.i+len(word)]) != word {
		return nil, false
	}
	l.i += len(word)
	return l.b[l.i-len(word) : l.i], true
}

// skipComposite skips an object or an array.
func (l *lexer) skipComposite() bool {
	if l.peek() == '{' {
		return l.object(func([]byte) bool {
			_, ok := l.value()
			return ok
		})
	}
	if !l.open('[') {
		return false
	}
	ok := l.elements(func() bool {
		_, ok := l.value()
		return ok
	})
	l.depth--
	return ok
}

// number skips a number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
func (l *lexer) number() bool {
	b, i := l.b, l.i
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		i = digits(b, i)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || b[i] < '0' || b[i] > '9' {
			return false
		}
		i = digits(b, i)
	}
	l.i = i
	return true
}

func digits(b []byte, i int) int {
	for i < len(b) && '0' <= b[i] && b[i] <= '9' {
		i++
	}
	return i
}

// intInto decodes an integer into n as encoding/json decodes it into an
// int (which is 64 bits wide wherever the service runs; 32 bits would
// overflow sooner, and go to encoding/json); null leaves n as it is.
func (l *lexer) intInto(n *int) bool {
	if l.null() {
		return true
	}
	var v int64
	if !l.int64Into(&v) {
		return false
	}
	if int64(int(v)) != v {
		return false
	}
	*n = int(v)
	return true
}

// int64Into decodes an integer into n; null leaves n as it is. A number
// with a fraction or an exponent, or one that overflows, is an error to
// encoding/json (or not, for 1e2 into a float): it is not taken here.
func (l *lexer) int64Into(n *int64) bool {
	if l.null() {
		return true
	}
	start := l.i
	if !l.number() {
		return false
	}
	b := l.b[start:l.i]
	neg := b[0] == '-'
	if neg {
		b = b[1:]
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
		if v > (1<<63)/10 {
			return false
		}
		v = v*10 + uint64(c-'0')
	}
	switch {
	case neg && v <= 1<<63:
		*n = -int64(v)
	case !neg && v < 1<<63:
		*n = int64(v)
	default:
		return false
	}
	return true
}

// stringInto decodes a string into s; null leaves s as it is.
func (l *lexer) stringInto(s *string) bool {
	if l.null() {
		return true
	}
	v, ok := l.string()
	if ok {
		*s = v
	}
	return ok
}

// string decodes a string value.
func (l *lexer) string() (string, bool) {
	if l.peek() != '"' {
		return "", false
	}
	start := l.i
	plain, ok := l.skipString()
	if !ok {
		return "", false
	}
	if plain {
		return string(l.b[start+1 : l.i-1]), true
	}
	return unquoteChecked(l.b[start:l.i])
}

// skipString skips the string at l.i, checking it; plain reports that it
// holds nothing but printable ASCII without escapes, which is its own
// decoding.
func (l *lexer) skipString() (plain, ok bool) {
	b, i := l.b, l.i+1
	plain = true
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			l.i = i + 1
			return plain, true
		case c < ' ':
			return false, false
		case c == '\\':
			plain = false
			i++
			if i >= len(b) {
				return false, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(b)-i < 5 {
					return false, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return false, false
					}
				}
				i += 5
			default:
				return false, false
			}
		case c >= utf8.RuneSelf:
			plain = false
			i++
		default:
			i++
		}
	}
	return false, false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unquoteChecked decodes a JSON string literal (quotes included) as
// encoding/json does: escapes decoded, a lone or broken surrogate and
// every byte of invalid UTF-8 replaced by U+FFFD. It reports false for a
// literal encoding/json refuses.
func unquoteChecked(s []byte) (string, bool) {
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		return "", false
	}
	s = s[1 : len(s)-1]
	if plainUTF8(s) {
		return string(s), true
	}
	b := make([]byte, 0, len(s)+2*utf8.UTFMax)
	for r := 0; r < len(s); {
		switch c := s[r]; {
		case c == '\\':
			r++
			if r >= len(s) {
				return "", false
			}
			switch s[r] {
			case '"', '\\', '/':
				b = append(b, s[r])
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				rr := getu4(s[r-1:])
				if rr < 0 {
					return "", false
				}
				r += 5
				if utf16.IsSurrogate(rr) {
					if dec := utf16.DecodeRune(rr, getu4(s[r:])); dec != unicode.ReplacementChar {
						r += 6
						b = utf8.AppendRune(b, dec)
						continue
					}
					rr = unicode.ReplacementChar
				}
				b = utf8.AppendRune(b, rr)
				continue
			default:
				return "", false
			}
			r++
		case c == '"', c < ' ':
			return "", false
		case c < utf8.RuneSelf:
			b = append(b, c)
			r++
		default:
			rr, size := utf8.DecodeRune(s[r:])
			r += size
			b = utf8.AppendRune(b, rr)
		}
	}
	return string(b), true
}

// plainUTF8 reports whether s needs no decoding: no escape, quote or
// control character, and valid UTF-8.
func plainUTF8(s []byte) bool {
	for _, c := range s {
		if c == '\\' || c == '"' || c < ' ' {
			return false
		}
	}
	return utf8.Valid(s)
}

// getu4 decodes the \uXXXX escape at the start of s, or returns -1.
func getu4(s []byte) rune {
	if len(s) < 6 || s[0] != '\\' || s[1] != 'u' {
		return -1
	}
	var r rune
	for _, c := range s[2:6] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return -1
		}
		r = r*16 + rune(c)
	}
	return r
}
