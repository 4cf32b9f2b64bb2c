// Package custom runs tools declared in configuration and backed by a shell
// command: the command runs with bash -c in the workspace, receives the
// call's arguments JSON on standard input and in PENGUIN_TOOL_ARGS, and its
// combined standard output and error is the tool's output. A non-zero exit
// status marks the call failed.
package custom

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/tool"
)

// Options are what every custom tool of an environment shares.
type Options struct {
	// Shell runs the command as shell -c COMMAND; empty means bash.
	Shell string
	// Dir is the working directory, the workspace.
	Dir string
	// Env is the environment of the command (the vault included).
	Env []string
	// Launcher applies the environment's sandbox; nil means
	// command.Unconfined.
	Launcher command.Launcher
}

// Tool is one custom tool.
type Tool struct {
	def     *penguinv1.ToolDefinition
	perm    penguinv1.Permission
	command string
	opts    Options
}

// New returns the custom tool of spec. Its parameters default to an object
// with any properties, and its permission to rw.
func New(spec *penguinv1.ToolSpec, opts Options) (*Tool, error) {
	if strings.TrimSpace(spec.GetCommand()) == "" {
		return nil, fmt.Errorf("custom tool %q has no command", spec.GetName())
	}
	params := spec.GetParameters()
	if params == "" {
		params = `{"type":"object"}`
	}
	perm := spec.GetPermission()
	if perm == penguinv1.Permission_PERMISSION_UNSPECIFIED {
		perm = penguinv1.Permission_PERMISSION_RW
	}
	if opts.Shell == "" {
		opts.Shell = "bash"
	}
	if opts.Launcher == nil {
		opts.Launcher = command.Unconfined()
	}
	return &Tool{
		def:     &penguinv1.ToolDefinition{Name: spec.GetName(), Description: spec.GetDescription(), Parameters: params},
		perm:    perm,
		command: spec.GetCommand(),
		opts:    opts,
	}, nil
}

// Definition implements tool.Tool.
func (t *Tool) Definition() *penguinv1.ToolDefinition { return t.def }

// Permission implements tool.Tool.
func (t *Tool) Permission() penguinv1.Permission { return t.perm }

// Run implements tool.Tool.
func (t *Tool) Run(ctx context.Context, args string, out tool.Output) (tool.Result, error) {
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	var probe map[string]any
	if err := tool.DecodeArgs(args, &probe); err != nil {
		return tool.Result{}, err
	}
	cmd := exec.Command(t.opts.Shell, "-c", t.command)
	cmd.Dir = t.opts.Dir
	cmd.Env = append(append([]string(nil), t.opts.Env...), "PENGUIN_TOOL_ARGS="+args)
	cmd.Stdin = strings.NewReader(args)
	r, w, err := os.Pipe()
	if err != nil {
		return tool.Result{}, fmt.Errorf("creating the output pipe: %w", err)
	}
	cmd.Stdout, cmd.Stderr = w, w
	// The launcher makes the command lead a session of its own, so that
	// everything it starts can be found and ended.
	tracker, err := t.opts.Launcher.Launch(cmd)
	if err != nil {
		r.Close()
		w.Close()
		return tool.Result{}, fmt.Errorf("applying the sandbox: %w", err)
	}
	defer tracker.Release()
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return tool.Result{}, fmt.Errorf("starting the tool's command: %w", err)
	}
	w.Close()
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(out, r)
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var waitErr error
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		_ = tracker.Kill()
		waitErr = <-exited
	}
	// A one-shot tool leaves nothing behind: whatever it started in the
	// background ends with it, which also closes the pipe.
	_ = tracker.Kill()
	select {
	case <-copied:
	case <-time.After(2 * time.Second):
		// A process outside the session holds the pipe open.
	}
	r.Close()
	<-copied
	if ctx.Err() != nil {
		return tool.Result{}, ctx.Err()
	}
	if waitErr != nil {
		var exitErr *exec.ExitError
		if errors.As(waitErr, &exitErr) {
			code := exitErr.ExitCode()
			if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
			return tool.Result{StopReason: penguinv1.StopReason_STOP_REASON_FAILED, Note: fmt.Sprintf("[exit code %d]", code)}, nil
		}
		return tool.Result{}, fmt.Errorf("running the tool's command: %w", waitErr)
	}
	return tool.Result{}, nil
}
