package catalog

import (
	"os"
	"testing"
)

// BenchmarkBuiltin is what the first use of the built-in catalog does
// now: make the literal's maps, then index and check it.
func BenchmarkBuiltin(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		builtinMaps()
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
