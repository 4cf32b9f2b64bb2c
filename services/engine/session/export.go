package session

import (
	"context"
	"fmt"

	"github.com/penguin-agent/penguin/internal/transcript"
)

// exportPage is how many events Export reads at a time.
const exportPage = 500

// Export sends a session's log in the JSONL trace format
// (docs/trace-format.md), one
// line (without its newline) per persisted event, with the index of the
// model context the line belongs to (see transcript.Contexts). index picks one
// context (1-based); zero sends them all, in order. An index past the
// last context is ErrNotFound.
func (m *Manager) Export(ctx context.Context, id string, index int, send func(line string, index int) error) error {
	if index < 0 {
		return fmt.Errorf("%w: the context index must not be negative, got %d", ErrInvalid, index)
	}
	if _, err := m.store.GetSession(ctx, id); err != nil {
		return err
	}
	var (
		after    int64
		contexts transcript.Contexts
		last     int
	)
	for {
		events, err := m.store.ReadEvents(ctx, id, after, exportPage)
		if err != nil {
			return err
		}
		for _, e := range events {
			after = e.Sequence
			last = contexts.Of(e.Message)
			if index > 0 && last != index {
				if last > index {
					return nil
				}
				continue
			}
			line, err := transcript.Marshal(e.Message)
			if err != nil {
				return err
			}
			if err := send(string(line), last); err != nil {
				return err
			}
		}
		if len(events) < exportPage {
			break
		}
	}
	if index > last {
		return fmt.Errorf("%w: session %s has %d model contexts; there is no context %d", ErrNotFound, id, last, index)
	}
	return nil
}
