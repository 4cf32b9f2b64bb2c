package builtin

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment/ignore"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

const (
	maxGlobResults  = 1000
	defaultGrepMax  = 500
	maxGrepFileSize = 16 << 20
	maxGrepLine     = 500
)

// searchDir resolves the optional path argument of glob and grep to the
// tree it lies in and its name there.
func searchDir(d Deps, p string) (*workspace.Tree, string, fs.FileInfo, error) {
	if p == "" {
		p = "."
	}
	tree, name, err := d.Root.Locate(p, false)
	if err != nil {
		return nil, "", nil, err
	}
	info, err := tree.Stat(name)
	if err != nil {
		return nil, "", nil, fileError(p, err)
	}
	return tree, name, info, nil
}

// globTool is glob.
type globTool struct{ d Deps }

func (t *globTool) Permission() penguinv1.Permission { return permR }

func (t *globTool) Definition() *penguinv1.ToolDefinition { return globToolDef }

var globToolDef = def("glob",
	`Find files by name with a glob pattern, such as "**/*.go" or "src/*.{ts,tsx}": "*" and "?" stay within one directory, "**" spans any number of them. `+
		"Paths matched by .gitignore are skipped. Returns workspace-relative paths, sorted.",
	`{"type":"object","properties":{`+
		`"pattern":{"type":"string","description":"The glob, relative to path."},`+
		`"path":{"type":"string","description":"The directory to search; default the workspace root."}`+
		`},"required":["pattern"]}`)

type globArgs struct {
	Pattern string `json:"pattern"`
	Path    string `json:"path"`
}

func (t *globTool) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a globArgs
	if err := tool.DecodeArgs(raw, &a, "pattern"); err != nil {
		return tool.Result{}, err
	}
	g, err := ignore.CompileGlob(a.Pattern)
	if err != nil {
		return tool.Result{}, fmt.Errorf("bad glob %q: %w", a.Pattern, err)
	}
	tree, dir, info, err := searchDir(t.d, a.Path)
	if err != nil {
		return tool.Result{}, err
	}
	if !info.IsDir() {
		return tool.Result{}, fmt.Errorf("%s is not a directory", a.Path)
	}
	prefix := ""
	if dir != "." {
		prefix = dir + "/"
	}
	var b strings.Builder
	n := 0
	more := false
	err = ignore.Walk(ctx, tree, dir, func(e ignore.Entry) error {
		if e.Entry.IsDir() {
			return nil
		}
		if !g.Match(strings.TrimPrefix(e.Rel, prefix)) {
			return nil
		}
		if n == maxGlobResults {
			more = true
			return ignore.ErrStop
		}
		n++
		b.WriteString(tree.Show(e.Rel))
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		return tool.Result{}, err
	}
	if n == 0 {
		fmt.Fprintf(out, "No files match %q", a.Pattern)
		return tool.Result{}, nil
	}
	_, _ = out.WriteString(strings.TrimSuffix(b.String(), "\n"))
	if more {
		return tool.Result{Note: fmt.Sprintf("[only the first %d matches are listed; narrow the pattern or the path]", maxGlobResults)}, nil
	}
	return tool.Result{}, nil
}

// grepTool is grep.
type grepTool struct{ d Deps }

func (t *grepTool) Permission() penguinv1.Permission { return permR }

func (t *grepTool) Definition() *penguinv1.ToolDefinition { return grepToolDef }

var grepToolDef = def("grep",
	"Search file contents with a regular expression (RE2 syntax), skipping binary files and paths matched by .gitignore. "+
		`output_mode "content" (default) gives path:line:text, "files_with_matches" the matching files, "count" the matches per file.`,
	`{"type":"object","properties":{`+
		`"pattern":{"type":"string","description":"The regular expression."},`+
		`"path":{"type":"string","description":"A file or directory to search; default the workspace root."},`+
		`"glob":{"type":"string","description":"Only search files matching this glob, such as \"*.go\" (matched against the file name) or \"src/**/*.ts\"."},`+
		`"ignore_case":{"type":"boolean","description":"Match case-insensitively."},`+
		`"output_mode":{"type":"string","enum":["content","files_with_matches","count"]},`+
		`"context":{"type":"integer","description":"Lines of context around each match, in content mode."},`+
		`"max_results":{"type":"integer","description":"The most lines (or files) to return; default 500."}`+
		`},"required":["pattern"]}`)

type grepArgs struct {
	Pattern    string `json:"pattern"`
	Path       string `json:"path"`
	Glob       string `json:"glob"`
	IgnoreCase bool   `json:"ignore_case"`
	OutputMode string `json:"output_mode"`
	Context    int    `json:"context"`
	MaxResults int    `json:"max_results"`
}

func (t *grepTool) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a grepArgs
	if err := tool.DecodeArgs(raw, &a, "pattern"); err != nil {
		return tool.Result{}, err
	}
	expr := a.Pattern
	if a.IgnoreCase {
		expr = "(?i)" + expr
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return tool.Result{}, fmt.Errorf("bad regular expression %q: %w", a.Pattern, err)
	}
	// The quick test of a whole file must let ^ and $ match at every
	// line, as they do when the lines are matched one by one.
	whole := regexp.MustCompile("(?m)" + expr)
	switch a.OutputMode {
	case "":
		a.OutputMode = "content"
	case "content", "files_with_matches", "count":
	default:
		return tool.Result{}, fmt.Errorf(`"output_mode" must be "content", "files_with_matches" or "count", not %q`, a.OutputMode)
	}
	if a.Context < 0 || a.Context > 50 {
		return tool.Result{}, errors.New(`"context" must be between 0 and 50`)
	}
	limit := a.MaxResults
	if limit <= 0 {
		limit = defaultGrepMax
	}
	var filter *ignore.Glob
	filterByName := false
	if a.Glob != "" {
		if filter, err = ignore.CompileGlob(a.Glob); err != nil {
			return tool.Result{}, fmt.Errorf("bad glob %q: %w", a.Glob, err)
		}
		filterByName = !strings.Contains(a.Glob, "/")
	}
	tree, target, info, err := searchDir(t.d, a.Path)
	if err != nil {
		return tool.Result{}, err
	}
	g := &grepper{re: re, whole: whole, mode: a.OutputMode, context: a.Context, limit: limit}
	if !info.IsDir() {
		g.file(ctx, tree, target)
	} else {
		err = ignore.Walk(ctx, tree, target, func(e ignore.Entry) error {
			if !e.Entry.Type().IsRegular() {
				return nil // directories, and symbolic links, which are not followed
			}
			if filter != nil {
				name := e.Rel
				if filterByName {
					name = e.Entry.Name()
				}
				if !filter.Match(name) {
					return nil
				}
			}
			if g.file(ctx, tree, e.Rel) {
				return ignore.ErrStop
			}
			return nil
		})
		if err != nil {
			return tool.Result{}, err
		}
	}
	if g.results == 0 {
		fmt.Fprintf(out, "No matches for %q", a.Pattern)
		return tool.Result{}, nil
	}
	_, _ = out.WriteString(strings.TrimSuffix(g.b.String(), "\n"))
	if g.full {
		return tool.Result{Note: fmt.Sprintf("[stopped after %d results; narrow the search or raise max_results]", limit)}, nil
	}
	return tool.Result{}, nil
}

// grepper accumulates results.
type grepper struct {
	re      *regexp.Regexp // matched against one line
	whole   *regexp.Regexp // re with ^ and $ at every line, against a whole file
	mode    string
	context int
	limit   int
	results int
	full    bool
	b       strings.Builder
}

// file searches the file name of tree and reports whether the result
// limit is reached. Files it cannot read as regular files of at most
// maxGrepFileSize bytes are skipped.
func (g *grepper) file(ctx context.Context, tree *workspace.Tree, name string) bool {
	if ctx.Err() != nil {
		return true
	}
	data, err := tree.ReadFile(name, maxGrepFileSize)
	if err != nil || bytes.IndexByte(data[:min(len(data), sniffBytes)], 0) >= 0 {
		return false
	}
	rel := tree.Show(name)
	if !g.whole.Match(data) {
		return false
	}
	switch g.mode {
	case "files_with_matches":
		g.b.WriteString(rel + "\n")
		g.results++
	case "count":
		n := 0
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), len(data)+1)
		for sc.Scan() {
			if g.re.Match(sc.Bytes()) {
				n++
			}
		}
		fmt.Fprintf(&g.b, "%s:%d\n", rel, n)
		g.results++
	default:
		g.content(rel, data)
	}
	if g.results >= g.limit {
		g.full = true
		return true
	}
	return false
}

func (g *grepper) content(rel string, data []byte) {
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	printed := -1 // last line index printed
	for i, line := range lines {
		if !g.re.MatchString(line) {
			continue
		}
		from := max(0, i-g.context)
		if printed >= 0 && from > printed+1 && g.context > 0 {
			g.b.WriteString("--\n")
		}
		for j := max(from, printed+1); j <= min(len(lines)-1, i+g.context); j++ {
			sep := "-"
			if g.re.MatchString(lines[j]) {
				sep = ":"
			}
			text := strings.TrimSuffix(lines[j], "\r")
			if len(text) > maxGrepLine {
				text = strings.ToValidUTF8(text[:maxGrepLine], "") + "…"
			}
			fmt.Fprintf(&g.b, "%s%s%d%s%s\n", rel, sep, j+1, sep, text)
			printed = j
			g.results++
			if g.results >= g.limit {
				g.full = true
				return
			}
		}
	}
}
