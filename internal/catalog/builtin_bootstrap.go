//go:build gencatalog

package catalog

// The generator of builtin_gen.go imports this package, so it is built
// with the gencatalog tag, which leaves builtin_gen.go out and this empty
// catalog in: a builtin_gen.go that no longer compiles (after a field of
// the catalog's types changed) can still be written again.
var builtinCatalog Catalog

func builtinMaps() {}
