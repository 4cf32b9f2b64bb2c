package catalog

import (
	"os"
	"testing"
)

// BenchmarkBuiltinPrepare is what a start does to the built-in catalog
// now: index and check the compiled-in literal.
func BenchmarkBuiltinPrepare(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := builtinCatalog.prepare(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseCatalogJSON is what a start did before builtin_gen.go:
// decode catalog.json with Parse (which prepares it too).
func BenchmarkParseCatalogJSON(b *testing.B) {
	data, err := os.ReadFile("catalog.json")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}
