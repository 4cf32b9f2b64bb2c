// Package tool is the narrow contract between one tool and the environment's
// framing layer ("loose tools, tight framework"): a tool only writes content
// and reports how it ended; the framing layer owns the stream shape,
// timeouts, truncation, redaction and the conversion of failures into
// outputs, so that no tool can break the streaming discipline.
package tool

import (
	"context"
	"io"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Output receives a tool's output as it is produced. Every Write becomes
// (after redaction and truncation) a partial_tool_call_output delta, so a
// tool that streams simply writes as it goes. It is safe for concurrent use
// and never returns an error: once the call has ended, writes are dropped.
type Output interface {
	io.Writer
	io.StringWriter
}

// Result is how a tool says it ended. Everything is optional.
type Result struct {
	// StopReason is the tool's own verdict, the lowest-priority input of the
	// final stop_reason (abort > timeout > tool error > this).
	StopReason penguinv1.StopReason
	// Note is a terminal marker, such as an exit code, appended after the
	// output outside the truncation window so it survives a cut.
	Note string
	// Images are data URLs appended to the output.
	Images []string
}

// Tool is one tool of an environment, builtin, custom or MCP.
type Tool interface {
	// Definition is what the model sees: name, description and the JSON
	// Schema of the arguments.
	Definition() *penguinv1.ToolDefinition
	// Permission says whether the tool only reads or also writes.
	Permission() penguinv1.Permission
	// Run executes one call with the model's raw arguments JSON. An error
	// becomes a failed output whose text is the error's message, so errors
	// should read well to a model. Run must return soon after ctx is done.
	Run(ctx context.Context, args string, out Output) (Result, error)
}

// Limits are the framing bounds of one tool.
type Limits struct {
	// Timeout bounds one call; zero means no timeout.
	Timeout time.Duration
	// MaxOutput is the output cap in characters; zero means no cap.
	MaxOutput int
}

// DefaultTimeout is the per-call timeout of a tool that sets none.
const DefaultTimeout = 120 * time.Second

// DefaultMaxOutput is the output cap, in characters, of a tool that sets
// none.
const DefaultMaxOutput = 16000

// Func adapts a function to Tool, for small tools and tests.
type Func struct {
	Def  *penguinv1.ToolDefinition
	Perm penguinv1.Permission
	Fn   func(ctx context.Context, args string, out Output) (Result, error)
}

// Definition implements Tool.
func (f Func) Definition() *penguinv1.ToolDefinition { return f.Def }

// Permission implements Tool.
func (f Func) Permission() penguinv1.Permission { return f.Perm }

// Run implements Tool.
func (f Func) Run(ctx context.Context, args string, out Output) (Result, error) {
	return f.Fn(ctx, args, out)
}

// Spec is a tool with its limits, as an environment offers it.
type Spec struct {
	Tool   Tool
	Limits Limits
	// ReadsOnly is set for the builtin tools that cannot change a file
	// (read_file, glob, grep, read_image): their calls leave a
	// workspace's last checkpoint as it was. A Permission is no such
	// promise: configuration may declare any, and custom and MCP tools
	// run what they like.
	ReadsOnly bool
}
