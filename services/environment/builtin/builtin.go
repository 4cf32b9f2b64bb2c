// Package builtin holds the environment's builtin tools: shell commands
// (exec_command, input_command, kill_command), file tools (read_file,
// write_file, edit_file, read_image) and workspace search (glob, grep).
// Each tool only produces content; the framing layer does the rest.
package builtin

import (
	"errors"
	"net/http"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/environment/command"
	"github.com/penguin-agent/penguin/services/environment/egress"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// Deps are what the builtin tools of one environment share.
type Deps struct {
	// Root confines file paths to the workspace.
	Root *workspace.Root
	// Commands runs shell commands.
	Commands Commands
	// HTTP fetches read_image URLs; nil means egress.NewClient with its
	// defaults (no internal destinations).
	HTTP *http.Client
	// ReadOnly makes write_file and edit_file refuse, for an environment
	// whose sandbox keeps the workspace read-only: the file tools must not
	// write where its commands cannot.
	ReadOnly bool
}

// Commands gives the command tools the environment's command manager,
// which is started (with the environment's sandbox) by the first command:
// an environment whose model only uses the file tools starts neither.
type Commands interface {
	// Start returns the manager, starting it the first time; its error
	// is the call's.
	Start() (*command.Manager, error)
	// Started returns the manager, or nil while no command has been
	// started, so that looking a process up starts nothing.
	Started() *command.Manager
}

// errReadOnly is the refusal of a write in a read-only environment.
var errReadOnly = errors.New("this environment is read-only (sandbox mode read-only): files cannot be written")

// Tools returns every builtin tool, in the order they are offered.
func Tools(d Deps) []tool.Spec {
	if d.HTTP == nil {
		d.HTTP = egress.NewClient(egress.Options{})
	}
	limits := func(timeout time.Duration) tool.Limits {
		return tool.Limits{Timeout: timeout, MaxOutput: tool.DefaultMaxOutput}
	}
	return []tool.Spec{
		{Tool: &execCommand{d}, Limits: limits(120 * time.Second)},
		{Tool: &inputCommand{d}, Limits: limits(130 * time.Second)},
		{Tool: &killCommand{d}, Limits: limits(30 * time.Second)},
		{Tool: &readFile{d}, Limits: limits(30 * time.Second), ReadsOnly: true},
		{Tool: &editFile{d}, Limits: limits(30 * time.Second)},
		{Tool: &writeFile{d}, Limits: limits(30 * time.Second)},
		{Tool: &readImage{d}, Limits: limits(60 * time.Second), ReadsOnly: true},
		{Tool: &globTool{d}, Limits: limits(30 * time.Second), ReadsOnly: true},
		{Tool: &grepTool{d}, Limits: limits(60 * time.Second), ReadsOnly: true},
	}
}

// def builds a tool definition. Each builtin's is made once, a package
// variable its Definition returns: an environment asks its tools' several
// times as it is made (its tool list, its parameters, its answer), and
// one was made at every call. Nothing changes a definition once made (an
// override builds a new one); the answers that carry it are copied or
// marshalled.
func def(name, description, parameters string) *penguinv1.ToolDefinition {
	return &penguinv1.ToolDefinition{Name: name, Description: description, Parameters: parameters}
}

const (
	permR  = penguinv1.Permission_PERMISSION_R
	permRW = penguinv1.Permission_PERMISSION_RW
)
