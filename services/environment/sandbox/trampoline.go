//go:build linux

package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Trampoline returns the binary that environments' inits and confined
// commands start through: TrampolineName beside the running executable
// when it is there and speaks this Protocol, else "/proc/self/exe" (the
// penguin binary itself, whose sandbox-exec subcommand runs the same
// code). The lean binary starts in a few milliseconds; penguin, with every
// client and server library to initialise, in tens, and every confined
// command pays that. The reason says which was chosen and why, for the
// service's log. It is worked out once per process.
func Trampoline() (path, reason string) { return trampoline() }

var trampoline = sync.OnceValues(findTrampoline)

func findTrampoline() (path, reason string) {
	exe, err := os.Executable()
	if err != nil {
		return "/proc/self/exe", fmt.Sprintf("no %s: the running executable is unknown (%v)", TrampolineName, err)
	}
	lean := filepath.Join(filepath.Dir(exe), TrampolineName)
	if _, err := os.Stat(lean); err != nil {
		return "/proc/self/exe", fmt.Sprintf("no %s beside %s: confined commands start through penguin itself, which is slower", TrampolineName, exe)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, lean, SubcommandName, roleProtocol).Output()
	if got := strings.TrimSpace(string(out)); err != nil || got != Protocol {
		return "/proc/self/exe", fmt.Sprintf("%s speaks %q (%v), not %q: it belongs to another version of penguin, so confined commands start through penguin itself", lean, got, err, Protocol)
	}
	return lean, fmt.Sprintf("confined commands start through %s", lean)
}
