package approval_test

import (
	"context"
	"errors"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cmdpolicy"
	"github.com/penguin-agent/penguin/services/engine/approval"
)

func TestForMode(t *testing.T) {
	r, rw, unknown := penguinv1.Permission_PERMISSION_R, penguinv1.Permission_PERMISSION_RW, penguinv1.Permission_PERMISSION_UNSPECIFIED
	for _, tc := range []struct {
		mode penguinv1.ApprovalMode
		perm penguinv1.Permission
		want approval.Verdict
	}{
		{penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL, rw, approval.Allow},
		{penguinv1.ApprovalMode_APPROVAL_MODE_DENY_ALL, r, approval.Deny},
		{penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY, r, approval.Allow},
		{penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY, rw, approval.Ask},
		{penguinv1.ApprovalMode_APPROVAL_MODE_READ_ONLY, unknown, approval.Ask},
		{penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK, r, approval.Ask},
		{penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED, r, approval.Deny},
	} {
		if got := approval.ForMode(tc.mode, tc.perm); got != tc.want {
			t.Errorf("ForMode(%v, %v) = %v, want %v", tc.mode, tc.perm, got, tc.want)
		}
	}
}

type askerFunc func(context.Context, *penguinv1.ToolCall, penguinv1.Permission) (penguinv1.Decision, error)

func (f askerFunc) Ask(ctx context.Context, c *penguinv1.ToolCall, p penguinv1.Permission) (penguinv1.Decision, error) {
	return f(ctx, c, p)
}

func TestGate(t *testing.T) {
	pol, err := cmdpolicy.Compile(&penguinv1.CommandPolicy{UseDefaults: true})
	if err != nil {
		t.Fatal(err)
	}
	mode := penguinv1.ApprovalMode_APPROVAL_MODE_ALLOW_ALL
	asked := 0
	answer, answerErr := penguinv1.Decision_DECISION_ALLOW, error(nil)
	g := &approval.Gate{
		Mode:       func() penguinv1.ApprovalMode { return mode },
		Permission: func(context.Context, string) penguinv1.Permission { return penguinv1.Permission_PERMISSION_RW },
		Policy:     pol,
		Asker: askerFunc(func(context.Context, *penguinv1.ToolCall, penguinv1.Permission) (penguinv1.Decision, error) {
			asked++
			return answer, answerErr
		}),
	}
	ctx := context.Background()
	rm := &penguinv1.ToolCall{Name: "exec_command", Arguments: `{"cmd":"rm -rf /"}`}
	ls := &penguinv1.ToolCall{Name: "exec_command", Arguments: `{"cmd":"ls"}`}
	if d := g.Decide(ctx, rm); d != penguinv1.Decision_DECISION_FORBIDDEN {
		t.Fatalf("forbidden command under allow-all: %v", d)
	}
	if d := g.Decide(ctx, ls); d != penguinv1.Decision_DECISION_ALLOW || asked != 0 {
		t.Fatalf("allow-all: %v, asked %d", d, asked)
	}
	mode = penguinv1.ApprovalMode_APPROVAL_MODE_ALWAYS_ASK
	if d := g.Decide(ctx, ls); d != penguinv1.Decision_DECISION_ALLOW || asked != 1 {
		t.Fatalf("always-ask, allowed: %v, asked %d", d, asked)
	}
	answerErr = errors.New("nobody there")
	if d := g.Decide(ctx, ls); d != penguinv1.Decision_DECISION_DENY {
		t.Fatalf("a failed question must deny: %v", d)
	}
	if d := g.Decide(ctx, rm); d != penguinv1.Decision_DECISION_FORBIDDEN || asked != 2 {
		t.Fatalf("the policy answers before anyone is asked: %v, asked %d", d, asked)
	}
	g.Asker = nil
	if d := g.Decide(ctx, ls); d != penguinv1.Decision_DECISION_DENY {
		t.Fatalf("no source of decisions must deny: %v", d)
	}
}
