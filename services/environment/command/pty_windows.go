package command

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"

	"github.com/charmbracelet/x/conpty"
	"golang.org/x/sys/windows"
)

// havePTY says whether commands can have a pseudo console here: Windows
// 10 1809 and later have ConPTY; an older Windows runs them with pipes.
var havePTY = windows.NewLazySystemDLL("kernel32.dll").NewProc("CreatePseudoConsole").Find() == nil

// openTerminal gives cmd a new pseudo console (ConPTY, through the
// charmbracelet/x/conpty library) of 200 columns by 50 rows. os/exec
// cannot attach a process to one, so the command is started by the
// returned spawn rather than cmd.Start. A pseudo console is the console
// of the command alone: "\x03" written to it is Ctrl-C for every process
// attached, as a terminal's line discipline makes it SIGINT.
func openTerminal(*exec.Cmd) (commandIO, error) {
	console, err := conpty.New(200, 50, 0)
	if err != nil {
		return commandIO{}, fmt.Errorf("opening a pseudo console: %w", err)
	}
	// The library closes its own handles of the pipes with the console;
	// the session reads and writes duplicates, which it closes itself.
	output, err := dupFile(console.OutPipeReadFd(), "conpty-output")
	if err != nil {
		_ = console.Close()
		return commandIO{}, err
	}
	input, err := dupFile(console.InPipeWriteFd(), "conpty-input")
	if err != nil {
		_ = output.Close()
		_ = console.Close()
		return commandIO{}, err
	}
	spawn := func(cmd *exec.Cmd) (Process, error) { return spawnInConsole(console, cmd) }
	return commandIO{output: output, input: input, spawn: spawn, console: console}, nil
}

// dupFile duplicates the handle h as a file of this process that no
// child inherits.
func dupFile(h uintptr, name string) (*os.File, error) {
	self := windows.CurrentProcess()
	var d windows.Handle
	if err := windows.DuplicateHandle(self, windows.Handle(h), self, &d, 0, false, windows.DUPLICATE_SAME_ACCESS); err != nil {
		return nil, fmt.Errorf("duplicating the pseudo console's %s: %w", name, err)
	}
	return os.NewFile(uintptr(d), name), nil
}

// spawnInConsole starts cmd attached to console, with the directory,
// environment and command line (cmd.exe's raw one) that cmd holds. It
// drops CREATE_NEW_PROCESS_GROUP, which the launcher sets for commands on
// pipes: that flag turns Ctrl-C off in the new group, and the console is
// the command's own already. cmd.Process is set, for the Tracker that
// follows the command's processes by its pid.
func spawnInConsole(console *conpty.ConPty, cmd *exec.Cmd) (Process, error) {
	sys := syscall.SysProcAttr{}
	if cmd.SysProcAttr != nil {
		sys = *cmd.SysProcAttr
	}
	sys.CreationFlags &^= windows.CREATE_NEW_PROCESS_GROUP
	pid, handle, err := console.Spawn(cmd.Path, cmd.Args, &syscall.ProcAttr{Dir: cmd.Dir, Env: cmd.Env, Sys: &sys})
	if err != nil {
		return nil, err
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		_ = windows.TerminateProcess(windows.Handle(handle), 1)
		_ = windows.CloseHandle(windows.Handle(handle))
		return nil, err
	}
	cmd.Process = p
	return &consoleProcess{pid: pid, handle: windows.Handle(handle), console: console, cmd: cmd}, nil
}

// consoleProcess is a command started in a pseudo console.
type consoleProcess struct {
	pid     int
	handle  windows.Handle
	console *conpty.ConPty
	cmd     *exec.Cmd
}

func (p *consoleProcess) Pid() int { return p.pid }

// Wait waits for the process to exit, then closes its pseudo console:
// the console's output reaches its end only then, and processes the
// command left behind in it end with it (on Linux they may keep the
// terminal a little longer). The close runs on its own, as an older
// Windows blocks it until the session has read the last output.
func (p *consoleProcess) Wait() (int, error) {
	defer func() {
		_ = windows.CloseHandle(p.handle)
		_ = p.cmd.Process.Release()
		go p.console.Close()
	}()
	if _, err := windows.WaitForSingleObject(p.handle, windows.INFINITE); err != nil {
		return -1, fmt.Errorf("waiting for the command: %w", err)
	}
	var code uint32
	if err := windows.GetExitCodeProcess(p.handle, &code); err != nil {
		return -1, fmt.Errorf("reading the command's exit code: %w", err)
	}
	return int(code), nil
}
