// Package gencheck holds the test that keeps gen/ honest: the generated Go
// code is committed so the module builds without codegen tools, and this
// package's test fails whenever it differs from what `make generate` would
// write. The package has no code of its own.
package gencheck
