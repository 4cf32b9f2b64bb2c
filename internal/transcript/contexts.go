package transcript

import (
	"fmt"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// Contexts numbers the model contexts of a session's log the way trace
// files are numbered (docs/trace-format.md): one file is one complete model
// context, the session's first context is 1, and each session_meta after
// the first line opens the next (a compaction writes one where the fresh
// context starts). The compaction that closes a context belongs to it.
//
// Feed it every message of the log in order; the zero value is ready.
type Contexts struct {
	n int
}

// Of returns the index of the context m belongs to.
func (c *Contexts) Of(m *penguinv1.OmniMessage) int {
	if c.n == 0 || m.GetSessionMeta() != nil {
		c.n++
	}
	return c.n
}

// FileName is the name of the trace file of a session's context, as
// PenguinHarness names it: <session id>_<index, three digits or more>.jsonl.
func FileName(sessionID string, index int) string {
	return fmt.Sprintf("%s_%03d.jsonl", sessionID, index)
}
