// Package redacttest tells whether text still carries a secret, for the
// tests of redaction: it decodes the encodings the vault must catch
// independently of how the vault finds them.
package redacttest

import (
	"encoding/base64"
	"encoding/hex"
	"net/url"
	"slices"
	"strings"
)

// Leaks reports whether text still carries value in a recoverable form,
// line breaks ignored: plain, reversed, URL-escaped (either way of spelling a
// space), or in 8 consecutive characters of its hex (any case) or of the
// inner part of its base64 (either alphabet, any alignment).
func Leaks(text, value string) bool {
	flat := strings.NewReplacer("\r", "", "\n", "").Replace(text)
	if strings.Contains(flat, value) {
		return true
	}
	reversed := []rune(value)
	slices.Reverse(reversed)
	if strings.Contains(flat, string(reversed)) {
		return true
	}
	for _, unescape := range []func(string) (string, error){url.QueryUnescape, url.PathUnescape} {
		if plain, err := unescape(flat); err == nil && strings.Contains(plain, value) {
			return true
		}
	}
	h := hex.EncodeToString([]byte(value))
	if strings.Contains(strings.ToLower(flat), h[len(h)/2-4:len(h)/2+4]) {
		return true
	}
	for a := 0; a < 3; a++ {
		enc := base64.StdEncoding.EncodeToString(append(make([]byte, a), value...))
		mid := enc[len(enc)/2-4 : len(enc)/2+4]
		if strings.Contains(flat, mid) || strings.Contains(flat, strings.NewReplacer("+", "-", "/", "_").Replace(mid)) {
			return true
		}
	}
	return false
}
