// Command trampoline is penguin's sandbox trampoline alone: the
// "sandbox-exec" subcommand in a binary of its own, for tests of the
// environment service, whose own (race-instrumented) test binary starts
// many times slower than this one. It runs the same code as
// `penguin sandbox-exec`.
package main

import (
	"fmt"
	"os"

	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != sandbox.SubcommandName {
		fmt.Fprintf(os.Stderr, "usage: %s %s ROLE ...\n", os.Args[0], sandbox.SubcommandName)
		os.Exit(2)
	}
	err := sandbox.SandboxExec(os.Args[2:])
	fmt.Fprintf(os.Stderr, "penguin: %v\n", err)
	os.Exit(sandbox.ExitCode)
}
