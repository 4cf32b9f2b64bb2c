// Package ignore walks a workspace the way git sees it: paths matched by
// .gitignore files (nested ones included, with negation and directory-only
// patterns) and by .git/info/exclude are skipped, and .git itself is never
// entered. It also holds the glob matcher that the glob tool and gitignore
// patterns share.
package ignore

import (
	"path"
	"strings"
)

// Glob is a compiled slash-separated glob: "*", "?" and "[...]" match
// within one path segment and a "**" segment matches any number of
// segments, including none. Braces ("*.{go,md}") expand to alternatives.
type Glob struct {
	alts [][]string
}

// CompileGlob compiles pattern. It fails on a malformed character class.
func CompileGlob(pattern string) (*Glob, error) {
	g := &Glob{}
	for _, alt := range expandBraces(pattern) {
		alt = strings.TrimPrefix(alt, "./")
		segs := strings.Split(strings.Trim(alt, "/"), "/")
		for _, s := range segs {
			if s == "**" {
				continue
			}
			if _, err := path.Match(s, ""); err != nil {
				return nil, err
			}
		}
		g.alts = append(g.alts, segs)
	}
	return g, nil
}

// Match reports whether the slash-separated relative path matches.
func (g *Glob) Match(rel string) bool {
	segs := strings.Split(rel, "/")
	for _, alt := range g.alts {
		if matchSegments(alt, segs) {
			return true
		}
	}
	return false
}

// matchSegments matches pattern segments against path segments.
func matchSegments(pat, segs []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			rest := pat[1:]
			if len(rest) == 0 {
				return true
			}
			for i := 0; i <= len(segs); i++ {
				if matchSegments(rest, segs[i:]) {
					return true
				}
			}
			return false
		}
		if len(segs) == 0 {
			return false
		}
		if ok, _ := path.Match(pat[0], segs[0]); !ok {
			return false
		}
		pat, segs = pat[1:], segs[1:]
	}
	return len(segs) == 0
}

// expandBraces expands the first {a,b} group recursively. Unbalanced braces
// stay literal.
func expandBraces(p string) []string {
	open := strings.IndexByte(p, '{')
	if open < 0 {
		return []string{p}
	}
	depth := 0
	var parts []string
	last := open + 1
	for i := open; i < len(p); i++ {
		switch p[i] {
		case '{':
			depth++
		case ',':
			if depth == 1 {
				parts = append(parts, p[last:i])
				last = i + 1
			}
		case '}':
			depth--
			if depth == 0 {
				parts = append(parts, p[last:i])
				var out []string
				for _, part := range parts {
					out = append(out, expandBraces(p[:open]+part+p[i+1:])...)
				}
				return out
			}
		}
	}
	return []string{p}
}
