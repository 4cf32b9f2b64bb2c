package store

import (
	"context"
	"fmt"
)

// NewSessionQuery names what creating a session asks of the store
// (ReadForNewSession); a part left empty is not read.
type NewSessionQuery struct {
	// UserID is the caller whose memberships are read, all of them: the
	// project a new session goes in, and whether the caller may write
	// there, is decided from them.
	UserID string
	// Agent is the agent whose version is read.
	Agent AgentRef
	// Provider and ModelID name the model whose settings are read, in
	// Project and in every project UserID is a member of: the session's
	// project is one of those.
	Provider, ModelID, Project string
}

// NewSessionRead is what ReadForNewSession read, all at one moment.
type NewSessionRead struct {
	// Memberships are the caller's memberships (NewSessionQuery.UserID).
	Memberships []Member
	// Agent is the agent asked for; AgentRead says its version was read
	// (AgentVersion, zero when the store held no such agent), as
	// LeaseRead's are.
	Agent        AgentRef
	AgentRead    bool
	AgentVersion int64
	// provider and modelID name the model whose settings were read, in
	// project and the memberships' projects (settings: those that had
	// any); provider is empty when none were read.
	provider, modelID, project string
	settings                   []*ModelSetting
}

// ModelSetting returns the settings of the model in project as they were
// read (nil when the project has none), and whether they were read: ok is
// false for another model, or a project neither the query nor the
// caller's memberships named, which the caller then reads on its own.
func (r *NewSessionRead) ModelSetting(project, provider, modelID string) (s *ModelSetting, ok bool) {
	if r == nil || r.provider == "" || provider != r.provider || modelID != r.modelID || !r.named(project) {
		return nil, false
	}
	for _, s := range r.settings {
		if s.Project == project {
			return s, true
		}
	}
	return nil, true
}

// named says whether the model's settings were read in project.
func (r *NewSessionRead) named(project string) bool {
	if project == r.project {
		return true
	}
	for _, m := range r.Memberships {
		if m.ProjectID == project {
			return true
		}
	}
	return false
}

// readForNewSession is the one statement of ReadForNewSession, the same
// text in both dialects: each part's rows, tagged by kind, in five columns
// whose types the parts share (the memberships' role and the settings'
// price are the text; the membership's time of joining, the agent's
// version and the settings' window the first number).
const readForNewSession = `SELECT 0, project_id, role, created_at, 0 FROM memberships WHERE user_id = ?
UNION ALL
SELECT 1, '', '', version, 0 FROM agents WHERE project = ? AND name = ?
UNION ALL
SELECT 2, project_id, price, context_window, updated_at FROM model_settings
	WHERE provider = ? AND model_id = ? AND (project_id = ? OR project_id IN (SELECT project_id FROM memberships WHERE user_id = ?))`

// ReadForNewSession implements Store: one statement, one read
// transaction (one round trip on PostgreSQL), where the memberships, the
// agent's version and the model's settings were three.
func (t *teamSQL) ReadForNewSession(ctx context.Context, q NewSessionQuery) (*NewSessionRead, error) {
	const op = "read for a new session"
	if err := t.begin(op); err != nil {
		return nil, err
	}
	r := &NewSessionRead{Agent: q.Agent, AgentRead: q.Agent != AgentRef{}, provider: q.Provider, modelID: q.ModelID, project: q.Project}
	if q.ModelID == "" {
		r.provider = "" // nothing read
	}
	rows, done, err := t.query(ctx, readForNewSession, q.UserID, q.Agent.Project, q.Agent.Name,
		r.provider, q.ModelID, q.Project, q.UserID)
	if err != nil {
		return nil, t.classify(ctx, op, err)
	}
	defer done()
	for rows.Next() {
		var (
			kind          int
			project, text string
			n1, n2        int64
		)
		if err := rows.Scan(&kind, &project, &text, &n1, &n2); err != nil {
			return nil, t.classify(ctx, op, err)
		}
		switch kind {
		case 0:
			r.Memberships = append(r.Memberships, Member{ProjectID: project, UserID: q.UserID, Role: Role(text), CreatedAt: fromMicros(n1)})
		case 1:
			r.AgentVersion = n1
		case 2:
			s, err := ModelSetting{Project: project, Provider: q.Provider, ModelID: q.ModelID, ContextWindow: n1}.stored(text, n2)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", op, err)
			}
			r.settings = append(r.settings, s)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, t.classify(ctx, op, err)
	}
	return r, nil
}
