package loop

import (
	"fmt"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cmdpolicy"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
)

// Fixed texts the model reads. They are part of the behaviour, so tests and
// other packages refer to them by name.
const (
	// DeniedByUser is the output of a call a person (or the approval mode)
	// refused.
	DeniedByUser = "Tool call denied by user."
	// DeniedByPolicy is the output of a call the command policy vetoed:
	// the policy's own text, the same the environment answers with.
	DeniedByPolicy = cmdpolicy.DeniedOutput
	// Interrupted is the placeholder output of a call that had not finished
	// when the user aborted the run.
	Interrupted = "[interrupted: tool aborted by user]"
	// NotRun is the output of a committed tool call that was cut off by the
	// stream and so could not run.
	NotRun = "Tool call was incomplete and did not run."
	// Stranded is the output of an allowed call whose engine stopped (a
	// crash, a killed or stopped replica) before the call finished. It is
	// never run again: the model decides what to do.
	Stranded = "[interrupted: the engine running this tool call stopped before it finished; whatever it did may or may not have happened]"
	// NotAsked is the output of a call that was waiting for approval when
	// its engine stopped: it never ran.
	NotAsked = "[not run: the engine stopped while this tool call was waiting for approval]"
	// CallAborted is the output of a call whose run was interrupted while
	// the tool was working.
	CallAborted = "Tool call aborted."
	// NotRunCompacting answers a tool call in a compaction reply: tools are
	// not run while the model writes its summary.
	NotRunCompacting = "Tool call did not run: tools are not available while the context is being summarized."
)

// maxBlockOutput caps each tool output copied into a carry-over block, so
// a retry cannot blow up the context.
const maxBlockOutput = 4000

// maxReport caps the output a background completion report carries: its
// end, which says how the work ended, is kept.
const maxReport = 4000

// BackgroundDone is the completion report of work that ran in the
// background (a command, a subagent), a user message from the harness: a
// [background_task_done] head saying what finished and how, then body.
func BackgroundDone(kind, id, status, detail, body string) *penguinv1.OmniMessage {
	head := Block("background_task_done", fmt.Sprintf("kind: %s\nid: %s\nstatus: %s\ndetail: %s", kind, id, status, detail))
	return HarnessText(head + "\n" + body)
}

// ReportTail cuts the output of background work to the size a completion
// report carries, keeping its end.
func ReportTail(out string) string {
	if len(out) <= maxReport {
		return out
	}
	return fmt.Sprintf("[...%d chars of earlier output dropped...]\n", len(out)-maxReport) + out[len(out)-maxReport:]
}

// Block wraps body in the harness's [tag]…[/tag] marker.
func Block(tag, body string) string {
	return "[" + tag + "]\n" + strings.TrimRight(body, "\n") + "\n[/" + tag + "]"
}

// HarnessText returns a user-role text written by the harness.
func HarnessText(text string) *penguinv1.OmniMessage {
	return omni.SenderText(penguinv1.Sender_SENDER_HARNESS, text)
}

// SteeringMessage wraps queued user text as a standalone steering message.
// It is the user's own input, so it keeps the human sender.
func SteeringMessage(text string) *penguinv1.OmniMessage {
	return omni.UserText(Block("user_steering", text))
}

// transcript records what one model request produced, in order, so a retry
// or an abort can hand it back to the model as text.
type transcript struct {
	parts []string
	text  strings.Builder // assistant text not yet closed by a complete message
}

func (t *transcript) partialText(s string) { t.text.WriteString(s) }

func (t *transcript) flushText() {
	if t.text.Len() > 0 {
		t.parts = append(t.parts, "assistant: "+t.text.String())
		t.text.Reset()
	}
}

func (t *transcript) complete(m *penguinv1.OmniMessage) {
	switch p := m.GetPayload().(type) {
	case *penguinv1.OmniMessage_Text:
		t.text.Reset()
		t.parts = append(t.parts, "assistant: "+p.Text.GetText())
	case *penguinv1.OmniMessage_ToolCall:
		t.flushText()
		t.parts = append(t.parts, fmt.Sprintf("tool_call %s (id %s): %s", p.ToolCall.GetName(), p.ToolCall.GetToolCallId(), p.ToolCall.GetArguments()))
	case *penguinv1.OmniMessage_ToolCallOutput:
		out := p.ToolCallOutput.GetOutput()
		if len(out) > maxBlockOutput {
			out = out[:maxBlockOutput] + "\n[... output cut ...]"
		}
		status := ""
		if s := p.ToolCallOutput.GetStopReason(); s != penguinv1.StopReason_STOP_REASON_UNSPECIFIED && s != penguinv1.StopReason_STOP_REASON_COMPLETED {
			status = " [" + enumword.Word(s) + "]"
		}
		t.parts = append(t.parts, fmt.Sprintf("tool_call_output (id %s)%s: %s", p.ToolCallOutput.GetToolCallId(), status, out))
	}
}

func (t *transcript) String() string {
	t.flushText()
	return strings.Join(t.parts, "\n")
}

// retriedBlock tells the model that its previous attempt at the same request
// failed, and what that attempt had produced. Tools it ran are reported, not
// run again.
func retriedBlock(status penguinv1.StopReason, message, produced string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "The previous attempt at this request ended with %s", enumword.Word(status))
	if message != "" {
		fmt.Fprintf(&b, " (%s)", message)
	}
	if produced == "" {
		b.WriteString(" before producing any output.")
	} else {
		b.WriteString(" after producing the output below. Tool calls listed there already ran (or were denied); do not repeat them without reason.\n")
		b.WriteString(produced)
	}
	return Block("turn_retried", b.String())
}

// CutOffBlock tells the model what the request in flight when its engine
// stopped had produced: msgs are that request's complete messages, each
// tool call followed by its output. Those calls never joined the history;
// told about them, the model does not repeat what already ran.
func CutOffBlock(msgs []*penguinv1.OmniMessage) string {
	var t transcript
	for _, m := range msgs {
		t.complete(m)
	}
	return Block("turn_retried", "The engine running the previous request stopped before the request ended, after the model had produced the output below. Tool calls listed there already ran, were denied, or were cut off as their outputs say; do not repeat them without reason.\n"+t.String())
}

// abortedBlock flattens an interrupted request's partial output into the
// carry-over text of case B.
func abortedBlock(produced string) string {
	if produced == "" {
		return Block("turn_aborted", "The user interrupted the previous request before the model produced any output.")
	}
	return Block("turn_aborted", "The user interrupted the previous request. The model had produced this much; tool calls listed here already ran (or were denied):\n"+produced)
}
