package cli

import (
	"fmt"
	"github.com/penguin-agent/penguin/internal/termtext"
	"strings"

	"github.com/penguin-agent/penguin/internal/goal"
)

// harnessBlock splits text written as the engine's [tag]…[/tag] block into
// its tag and body; ok is false for any other text.
func harnessBlock(text string) (tag, body string, ok bool) {
	text = strings.TrimSpace(text)
	if !strings.HasPrefix(text, "[") {
		return "", "", false
	}
	end := strings.IndexByte(text, ']')
	if end < 2 || strings.ContainsAny(text[1:end], " \n[") {
		return "", "", false
	}
	tag = text[1:end]
	closing := "[/" + tag + "]"
	rest := text[end+1:]
	i := strings.Index(rest, closing)
	if i < 0 {
		return "", "", false
	}
	// Text after the block (a background report's output) belongs to it.
	body = strings.TrimSpace(rest[:i])
	if after := strings.TrimSpace(rest[i+len(closing):]); after != "" {
		body += "\n" + after
	}
	return tag, body, true
}

// UserLine renders a user-role text of the conversation for people: the
// person's own words after "› ", and the engine's blocks as labels instead
// of their markup (a steering line, a summary of the earlier context, a
// background job's report). It returns "" for notes meant for the model
// only.
func UserLine(text string) string {
	text = termtext.Clean(text)
	if goal.IsRoundPrompt(text) {
		// A goal round: the block is the engine's, the body the person's
		// (round one) or the engine's call to go on.
		_, body, _ := strings.Cut(text, "[/goal]")
		return "› " + strings.TrimSpace(body)
	}
	tag, body, ok := harnessBlock(text)
	if !ok {
		return "› " + text
	}
	switch tag {
	case "user_steering":
		return "» " + body
	case "context_summary":
		return fmt.Sprintf("≡ summary of the earlier conversation (%d lines)", strings.Count(body, "\n")+1)
	case "background_task_done":
		return "↳ background work finished: " + firstLine(strings.ReplaceAll(body, "\n", "; "))
	case "turn_aborted", "turn_retried":
		return ""
	}
	return "» " + strings.ReplaceAll(tag, "_", " ") + ": " + firstLine(body)
}
