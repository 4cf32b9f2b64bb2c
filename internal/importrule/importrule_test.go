package importrule_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/penguin-agent/penguin/"

// allowed lists, per directory, the packages below a service's folder it
// may import, and why. Everything else under internal/, cmd/ and e2e/ may
// import a service's root package only.
var allowed = map[string]map[string]string{
	"internal/assemble": {"*": "the composition root builds every service"},
	"cmd/penguin-sandbox": {
		"services/environment/sandbox": "the binary is the environment's sandbox spawner",
	},
	"cmd/penguin": {
		"services/environment/sandbox": "the binary re-executes itself as the sandbox spawner and takes the sandbox's flags",
		"services/engine/agentstate":   "the client commands find and read the default agent's configuration",
	},
	"e2e/bench": {
		"services/environment/sandbox": "the benchmark builds the sandbox spawner under its own name",
	},
	"internal/testkit/enginetest": {
		"services/engine/store": "the engine's test kit reads what the store recorded",
	},
}

// TestNoClientImportsAServiceInside fails on a new import of a package
// below a service's folder from internal/, cmd/ or e2e/.
func TestNoClientImportsAServiceInside(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	for _, top := range []string{"internal", "cmd", "e2e"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if name := d.Name(); name == "testdata" || name == "node_modules" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") {
				return nil
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			dir := filepath.ToSlash(filepath.Dir(rel))
			for _, spec := range f.Imports {
				imp, _ := strconv.Unquote(spec.Path.Value)
				if !insideService(imp) {
					continue
				}
				pkg := strings.TrimPrefix(imp, module)
				if ok := allowed[dir]; ok != nil && (ok["*"] != "" || ok[pkg] != "") {
					continue
				}
				bad = append(bad, rel+" imports "+pkg)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("%s: a client of a service imports only its root package; move what it needs out of the service (internal/) or ask the service over gRPC", b)
	}
}

// insideService reports whether imp is a package below a service's root
// package, such as services/llm/failure.
func insideService(imp string) bool {
	rest, ok := strings.CutPrefix(imp, module+"services/")
	return ok && strings.Contains(rest, "/")
}

// TestInsideService checks the rule's reading of import paths, so that
// the test above cannot pass by matching nothing.
func TestInsideService(t *testing.T) {
	for imp, want := range map[string]bool{
		module + "services/llm":                    false,
		module + "services/llm/failure":            true,
		module + "services/engine/store/storetest": true,
		module + "internal/transcript":             false,
		"example.com/services/llm/x":               false,
	} {
		if got := insideService(imp); got != want {
			t.Errorf("insideService(%q) = %v, want %v", imp, got, want)
		}
	}
}
