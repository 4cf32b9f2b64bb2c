package builtin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

const (
	defaultYield      = 60 * time.Second
	minYield          = 250 * time.Millisecond
	defaultWriteYield = 250 * time.Millisecond
	defaultPollYield  = 120 * time.Second
	// yieldMargin keeps the foreground window this far below the call's
	// deadline, so that a long command moves to the background instead of
	// being killed by the timeout.
	yieldMargin = time.Second
	killGrace   = 2 * time.Second
)

// foregroundWindow returns how long a call waits for its command before
// handing it to the background: the requested time, at least minYield,
// capped below ctx's deadline. Zero means no window: when the deadline is
// too close for one, the command stays in the foreground and the deadline
// ends it.
func foregroundWindow(ctx context.Context, requested time.Duration) time.Duration {
	w := max(requested, minYield)
	if deadline, ok := ctx.Deadline(); ok {
		room := time.Until(deadline) - yieldMargin
		if room < minYield {
			return 0
		}
		w = min(w, room)
	}
	return w
}

// pollWindow returns how long input_command waits for output: the
// requested time, at least a few milliseconds, capped below ctx's deadline.
// Unlike exec_command it never waits without limit: the command was not
// started by this call, and the call must return before its timeout.
func pollWindow(ctx context.Context, requested time.Duration) time.Duration {
	const least = 10 * time.Millisecond
	w := max(requested, least)
	if deadline, ok := ctx.Deadline(); ok {
		w = min(w, max(time.Until(deadline)-yieldMargin, least))
	}
	return w
}

// countingWriter counts what passes through to the tool's output.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}

// endResult reports how a command that is no longer running ended. A
// command killed under a reading call (by kill_command from another call,
// or by the environment's disposal, which may reach the command before its
// cancellation reaches the call) has no exit status worth reporting: it
// ended as aborted. Otherwise the exit code says how it went.
func endResult(st command.Status) tool.Result {
	if st.State == command.Killed {
		return tool.Result{Note: "[the command was killed]", StopReason: penguinv1.StopReason_STOP_REASON_ABORTED}
	}
	r := tool.Result{Note: fmt.Sprintf("[exit code %d]", st.ExitCode)}
	if st.Err != nil {
		r.Note = fmt.Sprintf("[no exit code: %v]", st.Err)
	}
	if st.Limits != "" {
		r.Note += " " + st.Limits
	}
	if st.ExitCode != 0 {
		r.StopReason = penguinv1.StopReason_STOP_REASON_FAILED
	}
	return r
}

func stillRunning(id string) tool.Result {
	return tool.Result{Note: fmt.Sprintf("[still running as process_id %s: poll it or send input with input_command, stop it with kill_command]", id)}
}

// execCommand is exec_command.
type execCommand struct{ d Deps }

func (t *execCommand) Permission() penguinv1.Permission { return permRW }

func (t *execCommand) Definition() *penguinv1.ToolDefinition { return execCommandDef }

var execCommandDef = def("exec_command",
	"Run a shell command in the workspace with bash -c, in a pseudo-terminal (or on plain pipes with tty false), and stream its output. "+
		"If it is still running after yield_time_ms it moves to the background and the result gives its process_id, "+
		"to be polled, fed input or stopped with input_command and kill_command. "+
		"With run_in_background the call returns the process_id at once and the command's completion is reported later.",
	`{"type":"object","properties":{`+
		`"description":{"type":"string","description":"One short sentence saying what this command does, shown to the user while it runs. Give it first."},`+
		`"cmd":{"type":"string","description":"The shell command to run."},`+
		`"workdir":{"type":"string","description":"Working directory inside the workspace; relative paths start at the workspace root, which is the default."},`+
		`"yield_time_ms":{"type":"integer","description":"How long to wait in the foreground before moving the command to the background; default 60000, minimum 250, capped below the tool's timeout."},`+
		`"run_in_background":{"type":"boolean","description":"Start the command in the background and return its process_id immediately; its completion is reported when it exits."},`+
		`"tty":{"type":"boolean","description":"Run in a pseudo-terminal (default true), so that interactive programs work. false runs on plain pipes, several times faster for commands that print a lot; Ctrl-C and Ctrl-D still work."}`+
		`},"required":["description","cmd"]}`)

type execArgs struct {
	Cmd             string `json:"cmd"`
	Workdir         string `json:"workdir"`
	YieldTimeMs     *int64 `json:"yield_time_ms"`
	RunInBackground bool   `json:"run_in_background"`
	TTY             *bool  `json:"tty"`
}

func (t *execCommand) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a execArgs
	if err := tool.DecodeArgs(raw, &a, "cmd"); err != nil {
		return tool.Result{}, err
	}
	if a.Cmd == "" {
		return tool.Result{}, errors.New(`"cmd" is empty`)
	}
	dir := t.d.Root.Dir()
	if a.Workdir != "" {
		// The handle checks the directory; the command then starts in it
		// by path, which is no boundary: what the command may reach is
		// the sandbox's business, not its working directory's.
		tree, name, err := t.d.Root.Locate(a.Workdir, true)
		if err != nil {
			return tool.Result{}, fmt.Errorf("workdir: %w", err)
		}
		info, err := tree.Stat(name)
		if errors.Is(err, workspace.ErrOutside) {
			return tool.Result{}, fmt.Errorf("workdir: %w", err)
		}
		if err != nil {
			return tool.Result{}, fmt.Errorf("workdir %q does not exist", a.Workdir)
		}
		if !info.IsDir() {
			return tool.Result{}, fmt.Errorf("workdir %q is not a directory", a.Workdir)
		}
		dir = filepath.Join(tree.Dir(), filepath.FromSlash(name))
	}
	commands, err := t.d.Commands.Start()
	if err != nil {
		return tool.Result{}, err
	}
	s, err := commands.Start(ctx, command.StartOptions{
		Command: a.Cmd, Dir: dir, Background: a.RunInBackground, Pipes: a.TTY != nil && !*a.TTY,
	})
	if err != nil {
		return tool.Result{}, err
	}
	if a.RunInBackground {
		fmt.Fprintf(out, "Started in the background as process_id %s; its completion will be reported when it exits.", s.ID())
		return tool.Result{}, nil
	}
	requested := defaultYield
	if a.YieldTimeMs != nil {
		requested = time.Duration(*a.YieldTimeMs) * time.Millisecond
	}
	window := foregroundWindow(ctx, requested)
	st, err := s.Stream(ctx, window, out)
	if err != nil {
		// Timeout or abort: the command and everything it started end
		// with the call.
		s.Kill(0)
		_, _ = out.Write(s.TakeUnread())
		commands.Remove(s.ID())
		return tool.Result{Note: "[the command and its process group were killed]"}, err
	}
	if st.State != command.Running {
		commands.Remove(s.ID())
		return endResult(st), nil
	}
	return stillRunning(s.ID()), nil
}

// inputCommand is input_command.
type inputCommand struct{ d Deps }

func (t *inputCommand) Permission() penguinv1.Permission { return permRW }

func (t *inputCommand) Definition() *penguinv1.ToolDefinition { return inputCommandDef }

var inputCommandDef = def("input_command",
	"Drive a command started by exec_command that is still running: type characters into its terminal, "+
		`send Ctrl-C with chars "\u0003", or send nothing to just wait for and read its new output. `+
		"Returns the output produced since it was last read, and the exit code once the command has exited.",
	`{"type":"object","properties":{`+
		`"description":{"type":"string","description":"One short sentence saying what this input does, shown to the user. Give it first."},`+
		`"process_id":{"type":"string","description":"The process_id returned by exec_command."},`+
		`"chars":{"type":"string","description":"Characters to type, for example \"yes\\n\"; \"\\u0003\" sends Ctrl-C, \"\\u0004\" Ctrl-D (end of input); empty only polls."},`+
		`"yield_time_ms":{"type":"integer","description":"How long to wait for output; default 250 after input, 120000 for an empty poll (which returns early when the command exits)."}`+
		`},"required":["description","process_id"]}`)

type inputArgs struct {
	ProcessID   string `json:"process_id"`
	Chars       string `json:"chars"`
	YieldTimeMs *int64 `json:"yield_time_ms"`
}

func (t *inputCommand) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a inputArgs
	if err := tool.DecodeArgs(raw, &a, "process_id"); err != nil {
		return tool.Result{}, err
	}
	commands, s, ok := lookup(t.d, a.ProcessID)
	if !ok {
		return tool.Result{}, unknownProcess(a.ProcessID)
	}
	requested := defaultPollYield
	if a.Chars != "" {
		requested = defaultWriteYield
		if err := s.Write(ctx, a.Chars); err != nil && !errors.Is(err, command.ErrExited) {
			return tool.Result{}, err
		}
	}
	if a.YieldTimeMs != nil {
		requested = time.Duration(*a.YieldTimeMs) * time.Millisecond
	}
	window := pollWindow(ctx, requested)
	cw := &countingWriter{w: out}
	st, err := s.Stream(ctx, window, cw)
	if err != nil {
		// The call ends, the command keeps running: it was not started
		// by this call.
		return stillRunning(s.ID()), err
	}
	if cw.n == 0 {
		_, _ = out.WriteString("[no new output]")
	}
	if st.State != command.Running {
		commands.Remove(s.ID())
		return endResult(st), nil
	}
	return stillRunning(s.ID()), nil
}

// lookup finds a command session by process_id; before the first command
// there is none, and nothing is started to say so.
func lookup(d Deps, id string) (*command.Manager, *command.Session, bool) {
	commands := d.Commands.Started()
	if commands == nil {
		return nil, nil, false
	}
	s, ok := commands.Get(id)
	return commands, s, ok
}

func unknownProcess(id string) error {
	return fmt.Errorf("no command session has process_id %q: it may have been killed, evicted, or already reported as finished", id)
}

// killCommand is kill_command.
type killCommand struct{ d Deps }

func (t *killCommand) Permission() penguinv1.Permission { return permRW }

func (t *killCommand) Definition() *penguinv1.ToolDefinition { return killCommandDef }

var killCommandDef = def("kill_command",
	"Stop a command session by process_id: SIGTERM to its whole process group, SIGKILL after a short grace. "+
		"Returns the output nobody has read yet. A session whose command already exited is removed too.",
	`{"type":"object","properties":{`+
		`"description":{"type":"string","description":"One short sentence saying why the command is stopped, shown to the user. Give it first."},`+
		`"process_id":{"type":"string","description":"The process_id returned by exec_command."}`+
		`},"required":["description","process_id"]}`)

type killArgs struct {
	ProcessID string `json:"process_id"`
}

func (t *killCommand) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a killArgs
	if err := tool.DecodeArgs(raw, &a, "process_id"); err != nil {
		return tool.Result{}, err
	}
	commands, s, ok := lookup(t.d, a.ProcessID)
	if !ok {
		return tool.Result{}, unknownProcess(a.ProcessID)
	}
	commands.Remove(s.ID())
	before := s.Info()
	if before.State == command.Running {
		s.Kill(killGrace)
	}
	_, _ = out.Write(s.TakeUnread())
	if before.State != command.Running {
		return tool.Result{Note: fmt.Sprintf("[process_id %s had already exited with code %d; removed]", s.ID(), before.ExitCode)}, nil
	}
	return tool.Result{Note: fmt.Sprintf("[killed process_id %s and its process group]", s.ID())}, nil
}
