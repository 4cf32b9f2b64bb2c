package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// AgentStore keeps what every agent is made of (its system_config.yaml,
// AGENTS.md, skills, memory and vault) as rows of files, per project and
// agent, so that every engine replica reads the same agents from the
// database they share and no replica needs a shared volume. Both stores
// [Open] returns implement it.
//
// Every agent has a version that grows with each change of any of its
// files; a file carries the version of the change that last wrote it. A
// change names, per file, the version it was based on, so that of two
// concurrent edits of one file one wins and the other gets an
// [*AgentConflict] naming the current version: nothing is ever silently
// overwritten.
type AgentStore interface {
	// ListAgents returns the project's agents sorted by name.
	ListAgents(ctx context.Context, project string) ([]Agent, error)
	// GetAgent returns an agent's metadata (its version), or ErrNotFound.
	GetAgent(ctx context.Context, project, name string) (Agent, error)
	// ReadAgent returns an agent and all its files sorted by path, read
	// in one transaction, or ErrNotFound.
	ReadAgent(ctx context.Context, project, name string) (Agent, []AgentFile, error)
	// CreateAgent creates an agent with files (ErrConflict when the name
	// is taken). The files' versions are set to the agent's first
	// version, 1.
	CreateAgent(ctx context.Context, project, name string, files []AgentFile) (Agent, error)
	// ChangeAgent applies changes atomically: all of them or, when one's
	// condition fails, none, with an error wrapping ErrConflict (an
	// [*AgentConflict]). It returns the agent at its new version.
	ChangeAgent(ctx context.Context, project, name string, changes []AgentChange) (Agent, error)
	// RenameAgent renames an agent with its files; ErrNotFound for an
	// unknown one, ErrConflict when the new name is taken.
	RenameAgent(ctx context.Context, project, from, to string) error
	// DeleteAgent deletes an agent with its files; ErrNotFound for an
	// unknown one.
	DeleteAgent(ctx context.Context, project, name string) error
}

// Agent is an agent's metadata.
type Agent struct {
	Project, Name string
	// Version grows with every change of the agent's files.
	Version int64
	// UpdatedAt is when the agent last changed.
	UpdatedAt time.Time
}

// AgentFile is one file of an agent, at a slash-separated path relative
// to the agent's directory (system_config.yaml, skills/x/SKILL.md, ...).
type AgentFile struct {
	Path string
	Data []byte
	// Version is the agent version that last wrote the file.
	Version int64
}

// Conditions of an [AgentChange] besides a version.
const (
	// AnyVersion applies a change whatever the file's version.
	AnyVersion int64 = -1
	// Absent applies a change only when the file does not exist.
	Absent int64 = 0
)

// AgentChange writes (or, with Delete, deletes) one file. IfVersion is
// the file's version the change is based on: [AnyVersion], [Absent], or a
// version the file must still have.
type AgentChange struct {
	Path      string
	Data      []byte
	Delete    bool
	IfVersion int64
}

// AgentConflict is the error of a change whose condition failed: Current
// is the file's version now, zero when it does not exist.
type AgentConflict struct {
	Path    string
	Current int64
}

func (e *AgentConflict) Error() string {
	if e.Current == 0 {
		return fmt.Sprintf("%s was deleted or never existed", e.Path)
	}
	return fmt.Sprintf("%s changed meanwhile: its current version is %d", e.Path, e.Current)
}

// Unwrap makes errors.Is(err, ErrConflict) hold.
func (e *AgentConflict) Unwrap() error { return ErrConflict }

// checkAgentArgs refuses an empty project or agent name.
func checkAgentArgs(op, project string, names ...string) error {
	if project == "" {
		return fmt.Errorf("%s: %w: empty project", op, ErrInvalid)
	}
	for _, n := range names {
		if n == "" {
			return fmt.Errorf("%s: %w: empty agent name", op, ErrInvalid)
		}
	}
	return nil
}

// checkChanges refuses a change without a path, or two changes of one
// path in one call.
func checkChanges(op string, changes []AgentChange) error {
	seen := make(map[string]bool, len(changes))
	for _, c := range changes {
		if c.Path == "" {
			return fmt.Errorf("%s: %w: a change without a path", op, ErrInvalid)
		}
		if seen[c.Path] {
			return fmt.Errorf("%s: %w: %s changed twice in one call", op, ErrInvalid, c.Path)
		}
		seen[c.Path] = true
	}
	return nil
}

// checkCondition reports whether a change may apply to a file whose
// version is current (zero when absent).
func checkCondition(c AgentChange, current int64) error {
	if c.IfVersion == AnyVersion || c.IfVersion == current {
		return nil
	}
	return &AgentConflict{Path: c.Path, Current: current}
}

// errAgentNotFound is the error for an unknown agent.
func errAgentNotFound(op, project, name string) error {
	return fmt.Errorf("%s: %w: agent %s of project %s", op, ErrNotFound, name, project)
}

// agentTx is one transaction of a backend on the agent tables; the logic
// of a change, the same for both backends, is written against it.
type agentTx interface {
	// lockAgent returns the agent's version, locking its row until the
	// transaction ends; found is false for an unknown agent.
	lockAgent(ctx context.Context, project, name string) (version int64, found bool, err error)
	// fileVersion returns a file's version, zero when it does not exist.
	fileVersion(ctx context.Context, project, name, path string) (int64, error)
	putFile(ctx context.Context, project, name, path string, data []byte, version int64) error
	deleteFile(ctx context.Context, project, name, path string) error
	setVersion(ctx context.Context, project, name string, version int64) error
}

// applyChanges checks every change's condition and then applies them all
// at the agent's next version, which it returns.
func applyChanges(ctx context.Context, op string, tx agentTx, project, name string, changes []AgentChange) (int64, error) {
	version, found, err := tx.lockAgent(ctx, project, name)
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, errAgentNotFound(op, project, name)
	}
	var conflicts []error
	for _, c := range changes {
		current, err := tx.fileVersion(ctx, project, name, c.Path)
		if err != nil {
			return 0, err
		}
		if err := checkCondition(c, current); err != nil {
			conflicts = append(conflicts, err)
		}
	}
	if len(conflicts) > 0 {
		return 0, fmt.Errorf("%s: %w", op, errors.Join(conflicts...))
	}
	next := version + 1
	for _, c := range changes {
		if c.Delete {
			err = tx.deleteFile(ctx, project, name, c.Path)
		} else {
			err = tx.putFile(ctx, project, name, c.Path, c.Data, next)
		}
		if err != nil {
			return 0, err
		}
	}
	if err := tx.setVersion(ctx, project, name, next); err != nil {
		return 0, err
	}
	return next, nil
}

// isStoreError reports whether err already speaks the store's vocabulary
// (it wraps one of the sentinel errors), so that it passes unwrapped.
func isStoreError(err error) bool {
	for _, s := range []error{ErrNotFound, ErrConflict, ErrInvalid, ErrCorrupt, ErrUnavailable} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// nonNil stores an empty file as an empty value, never as NULL.
func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

var (
	_ AgentStore = (*sqliteStore)(nil)
	_ AgentStore = (*pgStore)(nil)
)
