package session

import (
	"context"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// WatchSessions sends the newest sessions, then every change to the
// session list made through this manager (see package sessionwatch).
func (m *Manager) WatchSessions(ctx context.Context, snapshotSize int, send func(*penguinv1.WatchSessionsResponse) error) error {
	return m.watch.Watch(ctx, snapshotSize, send)
}
