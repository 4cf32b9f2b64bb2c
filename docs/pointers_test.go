package docs_test

import (
	"go/scanner"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package's directory.
const root = ".."

// TestLinksLeadIntoTheRepository checks that every relative link of the
// documents, the README and the other Markdown files of the repository
// leads to a file or directory that exists.
func TestLinksLeadIntoTheRepository(t *testing.T) {
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for _, path := range markdownFiles(t) {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range link.FindAllStringSubmatch(string(b), -1) {
			target, _, _ := strings.Cut(m[1], "#")
			if target == "" || strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			resolved := filepath.Join(filepath.Dir(path), filepath.FromSlash(target))
			if rel, err := filepath.Rel(root, resolved); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("%s links to %s, outside the repository", path, m[1])
				continue
			}
			if _, err := os.Stat(resolved); err != nil {
				t.Errorf("%s links to %s, which does not exist", path, m[1])
			}
		}
	}
}

// pointerOutside matches what points a reader outside the repository: the
// shared folder the project was started from, the documents of the
// harness Penguin was modelled on, and the word "reference" used as a
// pointer to them. docs/ in the repository is the place for what a reader
// needs.
var pointerOutside = regexp.MustCompile(`(?i)\.\./shared\b|/work/shared\b|shared/(design|reference|recipes)\b|` +
	`\b(omni-message|agent-loop|sessions-and-traces|message-flow|server-api|web-app|goal-mode)\.md\b|` +
	`\bthe\s+reference\b|\breference\x27s|\breference\s+(harness|system|docs?|documents?|trace|cli|implementation)\b`)

// TestNothingPointsOutsideTheRepository checks the comments of the Go
// code, the proto files, the Makefile, scripts, YAML, the web app's
// sources and every Markdown file for pointers outside the repository: a
// reader of the repository alone must be able to follow each of them.
func TestNothingPointsOutsideTheRepository(t *testing.T) {
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", "dist", "gen", "artifacts":
				return filepath.SkipDir
			}
			return nil
		}
		name := d.Name()
		ext := filepath.Ext(name)
		var text []string
		switch {
		case ext == ".go":
			text = goComments(t, path)
		case ext == ".proto" || ext == ".md" || ext == ".sh" || ext == ".yaml" || ext == ".yml" ||
			ext == ".ts" || ext == ".tsx" || ext == ".mjs" || name == "Makefile" || name == "Dockerfile" ||
			(ext == "" && filepath.Base(filepath.Dir(path)) == ".ci"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			text = []string{string(b)}
		default:
			return nil
		}
		checked++
		for _, s := range text {
			for _, m := range pointerOutside.FindAllString(s, -1) {
				t.Errorf("%s points outside the repository: %q; say it here or point to docs/", path, m)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("only %d files checked; the walk missed the repository", checked)
	}
}

// goComments returns the comments of a Go file.
func goComments(t *testing.T, path string) []string {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var s scanner.Scanner
	s.Init(fset.AddFile(path, -1, len(src)), src, nil, scanner.ScanComments)
	var out []string
	for {
		_, tok, lit := s.Scan()
		if tok == token.EOF {
			return out
		}
		if tok == token.COMMENT {
			out = append(out, lit)
		}
	}
}

// markdownFiles returns the Markdown files of the repository, outside
// installed packages.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if !d.IsDir() && filepath.Ext(path) == ".md" {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
