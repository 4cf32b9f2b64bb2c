// Command gencatalog writes catalog.json from the models.dev snapshot in
// modelsdev/catalog.json, and builtin_gen.go, the same catalog as a Go
// literal compiled into the binary. `go generate ./internal/catalog` runs
// it from the catalog package's directory, built with the gencatalog tag
// (see builtin_bootstrap.go).
package main

import (
	"fmt"
	"os"

	"github.com/penguin-agent/penguin/internal/catalog/internal/generate"
)

func main() {
	snap, err := os.ReadFile("modelsdev/catalog.json")
	if err == nil {
		var out []byte
		if out, err = generate.Generate(snap); err == nil {
			err = os.WriteFile("catalog.json", out, 0o644)
		}
		if err == nil {
			if out, err = generate.GoSource(out); err == nil {
				err = os.WriteFile("builtin_gen.go", out, 0o644)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gencatalog:", err)
		os.Exit(1)
	}
}
