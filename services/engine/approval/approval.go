// Package approval decides whether a tool call may run.
//
// A decision is made in three steps, in this order: the command policy
// (a deny-rule match is "forbidden" under every mode, and no person is
// asked), the session's approval mode (allow-all, deny-all, read-only
// passing tools that only read, always-ask), and, when the mode says ask, a
// person. With no way to ask a person, the answer is deny: nothing runs
// unattended that the mode did not allow.
package approval

import (
	"context"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Verdict is what an approval mode says about a call before a person is
// asked.
type Verdict int

const (
	// Deny refuses the call.
	Deny Verdict = iota
	// Allow runs the call.
	Allow
	// Ask leaves the call to a person.
	Ask
)

// DefaultMode is the approval mode of a session created without one, and
// the mode a Gate without a Mode func applies: nothing runs that a person
// did not allow.
const DefaultMode = penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL

// InteractiveMode is the approval mode a client with a person at it (the
// web app's form) offers first: tools that only read run, every other tool
// asks. Reading the workspace is what every task starts with, and asking
// for each read teaches people to allow without looking; a write or a
// command still waits for them.
const InteractiveMode = penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY

// ForMode applies an approval mode to a tool's permission. An unknown mode
// is treated as deny-all, the safe default, and under read-only a tool of
// unknown permission asks, like a writing one.
func ForMode(mode penguinv1.ApprovalMode, perm penguinv1.Permission) Verdict {
	switch mode {
	case penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL:
		return Allow
	case penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY:
		if perm == penguinv1.Permission_PERMISSION_R {
			return Allow
		}
		return Ask
	case penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK:
		return Ask
	default:
		return Deny
	}
}

// Policy is the command policy: it vetoes calls that would run a forbidden
// command. *cmdpolicy.Policy satisfies it.
type Policy interface {
	Evaluate(toolName, argsJSON string) (forbidden bool, rule string)
}

// Asker puts a call to a person and waits for the answer. It returns an
// error when no answer can come (ctx ended, nobody can be asked).
type Asker interface {
	Ask(ctx context.Context, call *penguinv1.ToolCall, perm penguinv1.Permission) (penguinv1.Decision, error)
}

// Gate decides on calls for one task. Its fields are read on every
// decision, so a mode change takes effect at the next call.
type Gate struct {
	// Mode returns the session's current approval mode.
	Mode func() penguinv1.ApprovalMode
	// Permission returns a tool's permission; unspecified when unknown.
	Permission func(ctx context.Context, name string) penguinv1.Permission
	// Policy vetoes forbidden commands; nil forbids nothing.
	Policy Policy
	// Asker asks a person; nil means nobody can be asked, so Ask becomes
	// deny.
	Asker Asker
}

// Decide returns allow, deny or forbidden for one call. It never fails: a
// question that cannot be answered is a deny.
func (g *Gate) Decide(ctx context.Context, call *penguinv1.ToolCall) penguinv1.Decision {
	if g.Policy != nil {
		if forbidden, _ := g.Policy.Evaluate(call.GetName(), call.GetArguments()); forbidden {
			return penguinv1.Decision_DECISION_FORBIDDEN
		}
	}
	mode := DefaultMode
	if g.Mode != nil {
		mode = g.Mode()
	}
	var perm penguinv1.Permission
	if mode == penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY || mode == penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK {
		if g.Permission != nil {
			perm = g.Permission(ctx, call.GetName())
		}
	}
	switch ForMode(mode, perm) {
	case Allow:
		return penguinv1.Decision_DECISION_ALLOW
	case Ask:
		if g.Asker == nil {
			return penguinv1.Decision_DECISION_DENY
		}
		d, err := g.Asker.Ask(ctx, call, perm)
		if err != nil || d != penguinv1.Decision_DECISION_ALLOW {
			return penguinv1.Decision_DECISION_DENY
		}
		return d
	default:
		return penguinv1.Decision_DECISION_DENY
	}
}
