// Package web holds Penguin's web app: its TypeScript sources (src/), its
// pinned npm toolchain (package.json, package-lock.json) and its build
// (dist/), which is committed and embedded here so that building Penguin
// needs no Node. `make web` rebuilds dist/, and `make web-check` (a step
// of CI) fails when dist/ is not what the sources build to.
//
// The app is written with Preact: the component model and hooks of React
// in a few kilobytes, so the embedded bundle stays small, and Vite builds
// its JSX without a plugin. The view model of a conversation (the stream
// reducer in src/omni/) is a plain module with unit tests of its own.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// App returns the built web app, index.html at its root.
func App() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		// The directory is embedded at build time; its absence is a build
		// error, not a run-time one.
		panic(err)
	}
	return sub
}
