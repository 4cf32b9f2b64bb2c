package emulator

import (
	"strconv"
	"unicode/utf8"
)

// The streaming paths build their JSON by appending to one reused buffer per
// request instead of marshalling a struct per chunk: a thousand concurrent
// streams then cost a few allocations per request rather than several per
// delta. The non-streaming paths use encoding/json.

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does, so the output always parses.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// appendInt appends n in decimal.
func appendInt(dst []byte, n int) []byte {
	return strconv.AppendInt(dst, int64(n), 10)
}

// nextPiece splits the first n characters (code points) off s. The pieces of
// a string concatenate back to it exactly, so streamed text and tool
// arguments equal the script byte for byte.
func nextPiece(s string, n int) (piece, rest string) {
	if n <= 0 {
		n = DefaultChunkSize
	}
	i := 0
	for count := 0; i < len(s) && count < n; count++ {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return s[:i], s[i:]
}
