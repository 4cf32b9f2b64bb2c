package session

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// MaxTitle is the longest title, in characters, that UpdateSession takes.
const MaxTitle = 200

// Update is what UpdateSession changes of a session; nil fields are kept.
type Update struct {
	Title         *string
	Pinned        *bool
	Archived      *bool
	ApprovalMode  *penguinv1.ApprovalMode
	ThinkingLevel *penguinv1.ThinkingLevel
}

// Update renames, pins or archives a session, or changes its approval
// mode or thinking level. Its title is trimmed, and
// refused when empty, longer than MaxTitle or holding control characters
// (it is shown on one line everywhere).
func (m *Manager) Update(ctx context.Context, id string, u Update) (*penguinv1.Session, error) {
	var title string
	if u.Title != nil {
		title = strings.TrimSpace(*u.Title)
		switch {
		case title == "":
			return nil, fmt.Errorf("%w: the title must not be empty", ErrInvalid)
		case utf8.RuneCountInString(title) > MaxTitle:
			return nil, fmt.Errorf("%w: the title is longer than %d characters", ErrInvalid, MaxTitle)
		case strings.IndexFunc(title, unicode.IsControl) >= 0:
			return nil, fmt.Errorf("%w: the title must be one line without control characters", ErrInvalid)
		}
	}
	if u.ApprovalMode != nil {
		if _, ok := penguinv1.ApprovalMode_name[int32(*u.ApprovalMode)]; !ok || *u.ApprovalMode == penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED {
			return nil, fmt.Errorf("%w: unknown approval mode %v", ErrInvalid, *u.ApprovalMode)
		}
	}
	if u.ThinkingLevel != nil {
		if _, ok := penguinv1.ThinkingLevel_name[int32(*u.ThinkingLevel)]; !ok {
			return nil, fmt.Errorf("%w: unknown thinking level %v", ErrInvalid, *u.ThinkingLevel)
		}
	}
	err := m.updateRow(ctx, id, func(r *store.Session, c *config) {
		if u.ApprovalMode != nil {
			r.ApprovalMode = *u.ApprovalMode
		}
		if u.ThinkingLevel != nil {
			r.ThinkingLevel = *u.ThinkingLevel
		}
		if u.Title != nil {
			r.Title = title
		}
		if u.Pinned != nil {
			c.Pinned = *u.Pinned
		}
		if u.Archived != nil {
			c.Archived = *u.Archived
		}
	})
	if err != nil {
		return nil, err
	}
	if u.ApprovalMode != nil {
		// A loaded session's gate reads the runtime's mode at each call.
		if rt := m.loaded(id); rt != nil {
			rt.mu.Lock()
			rt.mode = *u.ApprovalMode
			rt.mu.Unlock()
			m.release(rt)
		}
	}
	return m.Get(ctx, id)
}

// marks are the list marks of a session's config.
type marks struct {
	Pinned   bool `json:"pinned"`
	Archived bool `json:"archived"`
}

// listMarks reads a session's pinned and archived marks from its config.
// Most sessions have neither, and listing thousands of them should not
// parse each config in full, so a config that names neither is not read.
func listMarks(cfg []byte) marks {
	var mk marks
	if !bytes.Contains(cfg, []byte(`"pinned"`)) && !bytes.Contains(cfg, []byte(`"archived"`)) {
		return mk
	}
	// A config that does not parse is reported where it is used; the list
	// shows the session unmarked.
	_ = json.Unmarshal(cfg, &mk)
	return mk
}
