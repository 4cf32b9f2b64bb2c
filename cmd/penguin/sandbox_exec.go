package main

import (
	"context"
	"fmt"
	"io"

	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// sandboxExec is the hidden `penguin sandbox-exec` subcommand: the
// trampoline the environment service puts in front of every confined
// command (see package sandbox). It applies the confinement and replaces
// the process with the command, so it only returns on failure, with
// sandbox.ExitCode as the exit code: a failure to confine is then never
// mistaken for the command's own exit status. It is left out of the usage
// text because only the environment service runs it.
func sandboxExec(_ context.Context, args []string, stderr io.Writer) int {
	err := sandbox.SandboxExec(args)
	fmt.Fprintf(stderr, "penguin: %v\n", err)
	return sandbox.ExitCode
}
