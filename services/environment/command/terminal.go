//go:build !windows

package command

import (
	"os"
	"os/exec"
)

// openTerminal gives cmd a new pseudo-terminal as its stdin, stdout,
// stderr and controlling terminal.
func openTerminal(cmd *exec.Cmd) (commandIO, error) {
	controller, terminal, err := openPTY(50, 200)
	if err != nil {
		return commandIO{}, err
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = terminal, terminal, terminal
	// The terminal becomes the controlling terminal of the command's new
	// session (the launcher makes it a session leader).
	newSession(cmd, true)
	return commandIO{output: controller, input: controller, child: []*os.File{terminal}}, nil
}
