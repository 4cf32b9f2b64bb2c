package session

import (
	"context"

	"github.com/penguin-agent/penguin/services/engine/trace"
)

// exportPage is how many events Export reads at a time.
const exportPage = 500

// Export sends a session's log in the reference's JSONL trace format, one
// line (without its newline) per persisted event.
func (m *Manager) Export(ctx context.Context, id string, send func(line string) error) error {
	if _, err := m.store.GetSession(ctx, id); err != nil {
		return err
	}
	var after int64
	for {
		events, err := m.store.ReadEvents(ctx, id, after, exportPage)
		if err != nil {
			return err
		}
		for _, e := range events {
			line, err := trace.Marshal(e.Message)
			if err != nil {
				return err
			}
			if err := send(string(line)); err != nil {
				return err
			}
			after = e.Sequence
		}
		if len(events) < exportPage {
			return nil
		}
	}
}
