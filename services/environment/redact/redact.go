// Package redact replaces vault values with their names in tool output, in
// whole strings and in streams whose chunks may split a value anywhere.
package redact

import (
	"sort"
	"strings"
)

// Vault knows the secret values to hide. A nil *Vault hides nothing, so
// callers need no special case for an empty vault.
type Vault struct {
	secrets []secret // longest value first, so a longer secret wins over its own prefix
	first   [256]bool
}

type secret struct {
	value       string
	replacement string
}

// New returns a Vault for the name → value map, or nil when no value is
// set. Empty values are ignored: they would match everywhere.
func New(vault map[string]string) *Vault {
	v := &Vault{}
	for name, value := range vault {
		if value == "" {
			continue
		}
		v.secrets = append(v.secrets, secret{value: value, replacement: Replacement(name)})
		v.first[value[0]] = true
	}
	if len(v.secrets) == 0 {
		return nil
	}
	sort.Slice(v.secrets, func(i, j int) bool {
		if len(v.secrets[i].value) != len(v.secrets[j].value) {
			return len(v.secrets[i].value) > len(v.secrets[j].value)
		}
		return v.secrets[i].value < v.secrets[j].value
	})
	return v
}

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

// scan redacts text. When final is false it stops at the first position from
// which the rest of text could still grow into a secret, and returns that
// rest as held so the caller can retry once more text arrives.
func (v *Vault) scan(text string, final bool) (out, held string) {
	var b strings.Builder
	start := 0 // text[start:i] is copied verbatim when flushed
	for i := 0; i < len(text); {
		if !v.first[text[i]] {
			i++
			continue
		}
		rest := text[i:]
		matched := false
		partial := false
		for _, s := range v.secrets {
			if strings.HasPrefix(rest, s.value) {
				if b.Cap() == 0 {
					b.Grow(len(text))
				}
				b.WriteString(text[start:i])
				b.WriteString(s.replacement)
				i += len(s.value)
				start = i
				matched = true
				break
			}
			if !final && len(rest) < len(s.value) && strings.HasPrefix(s.value, rest) {
				partial = true
			}
		}
		if matched {
			continue
		}
		if partial {
			if start == 0 {
				return text[:i], rest
			}
			b.WriteString(text[start:i])
			return b.String(), rest
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
