// Command penguin-sandbox is penguin's sandbox trampoline alone: the
// hidden "penguin sandbox-exec" subcommand in a binary of its own. The
// environment service starts every environment's init and every confined
// command through it when it lies beside the penguin binary, because it
// starts in a few milliseconds, where penguin, with every client and
// server library to initialise, takes tens. Without it, the service uses
// "penguin sandbox-exec", which runs the same code.
package main

import (
	"fmt"
	"os"

	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

func main() {
	if len(os.Args) < 2 || os.Args[1] != sandbox.SubcommandName {
		fmt.Fprintf(os.Stderr, "usage: %s %s ROLE ...\n(started by the penguin environment service, not by hand)\n", os.Args[0], sandbox.SubcommandName)
		os.Exit(2)
	}
	err := sandbox.SandboxExec(os.Args[2:])
	fmt.Fprintf(os.Stderr, "penguin-sandbox: %v\n", err)
	os.Exit(sandbox.ExitCode)
}
