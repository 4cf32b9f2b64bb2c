package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set by release builds with -ldflags "-X main.version=...".
// Left empty, the version comes from the build info the Go toolchain
// records: the module version for `go install module@version`, else the
// commit the binary was built from.
var version string

// buildVersion returns the version of this binary: the -ldflags value,
// else the main module's version, else the VCS revision (with "+dirty"
// for uncommitted changes), else "unknown".
func buildVersion(stamped string, info *debug.BuildInfo, ok bool) string {
	if stamped != "" {
		return stamped
	}
	if !ok {
		return "unknown"
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev == "" {
		return "unknown"
	}
	rev = rev[:min(len(rev), 12)]
	if modified == "true" {
		rev += "+dirty"
	}
	return rev
}

// penguinVersion is this binary's version, as servers report it.
func penguinVersion() string {
	info, ok := debug.ReadBuildInfo()
	return buildVersion(version, info, ok)
}

// versionString is what `penguin version` prints after "penguin ".
func versionString() string {
	return fmt.Sprintf("%s (%s %s/%s)", penguinVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print the version",
		Args:  noArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "penguin %s\n", versionString())
		},
	}
}
