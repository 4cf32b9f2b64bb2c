//go:build !linux && !darwin && !windows

package command

import (
	"fmt"
	"os"
	"runtime"
)

// openPTY refuses: pseudo-terminals are offered on Linux, macOS and
// Windows only, so a command that asks for one runs with pipes instead.
func openPTY(uint16, uint16) (controller, terminal *os.File, err error) {
	return nil, nil, fmt.Errorf("pseudo-terminals are not available on %s: run the command without a terminal (pipes)", runtime.GOOS)
}

// havePTY says that commands run with pipes here, for want of a
// pseudo-terminal.
const havePTY = false
