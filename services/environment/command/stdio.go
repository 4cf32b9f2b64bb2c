package command

import (
	"fmt"
	"io"
	"os"
	"os/exec"
)

// commandIO holds the files between the environment and one command: the
// environment's ends (output, input) and the command's (child), which are
// closed in the environment once the command has started.
type commandIO struct {
	output, input *os.File
	child         []*os.File
	// spawn, when set, starts the command in place of cmd.Start: on
	// Windows, a command attached to a pseudo console is created by the
	// ConPTY library, which os/exec cannot do.
	spawn func(cmd *exec.Cmd) (Process, error)
	// console is what else the files need released when the command does
	// not start (Windows' pseudo console).
	console io.Closer
}

// closeChildEnds closes the command's ends in the environment, so that the
// output reaches end of file when the command's processes close theirs.
func (c commandIO) closeChildEnds() {
	for _, f := range c.child {
		_ = f.Close()
	}
}

// closeAll closes every file, for a command that did not start.
func (c commandIO) closeAll() {
	c.closeChildEnds()
	c.closeOwnEnds()
	if c.console != nil {
		_ = c.console.Close()
	}
}

// closeOwnEnds closes the environment's ends, once the command is done.
func (c commandIO) closeOwnEnds() {
	_ = c.output.Close()
	if c.input != c.output {
		_ = c.input.Close()
	}
}

// openPipes gives cmd a stdin pipe and one pipe for both stdout and
// stderr, so their lines interleave as the command wrote them.
func openPipes(cmd *exec.Cmd) (commandIO, error) {
	outR, outW, err := os.Pipe()
	if err != nil {
		return commandIO{}, fmt.Errorf("opening the output pipe: %w", err)
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		_ = outR.Close()
		_ = outW.Close()
		return commandIO{}, fmt.Errorf("opening the input pipe: %w", err)
	}
	growPipe(outW)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = inR, outW, outW
	newSession(cmd, false)
	return commandIO{output: outR, input: inW, child: []*os.File{inR, outW}}, nil
}
