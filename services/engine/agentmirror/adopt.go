package agentmirror

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// agentConfigFile marks a directory as an agent's.
const agentConfigFile = "system_config.yaml"

// Adopt brings the agent directories found under the mirror's root (those with a
// system_config.yaml: the
// agents/ directory an engine before the store kept its agents in, or one
// a person laid out by hand) into the store, as agents of the default
// project: each directory whose name the store does not know yet becomes
// an agent with its files, and the directory becomes its working copy. A
// directory the store already knows is left for [Mirror.Sync], which makes
// it the store's. Two replicas adopting at once are harmless: the second
// create of a name is a conflict, and that copy is the store's at its
// first sync.
func (m *Mirror) Adopt(ctx context.Context) error {
	entries, err := os.ReadDir(m.root)
	if err != nil {
		return fmt.Errorf("agent mirror: %w", err)
	}
	for _, e := range entries {
		if !e.IsDir() || ValidName(e.Name()) != nil {
			continue
		}
		dir := filepath.Join(m.root, e.Name())
		if _, err := os.Stat(filepath.Join(dir, agentConfigFile)); err != nil {
			continue // not an agent: every agent directory has its configuration
		}
		if base, err := readSyncState(dir); err != nil || base != nil {
			continue // a working copy already
		}
		if _, err := m.store.GetAgent(ctx, DefaultProject, e.Name()); err == nil {
			continue
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := m.adoptDir(ctx, e.Name(), dir); err != nil {
			return err
		}
	}
	return nil
}

func (m *Mirror) adoptDir(ctx context.Context, name, dir string) error {
	defer m.lock(DefaultProject, name)()
	files, err := scan(dir)
	if err != nil {
		return err
	}
	var list []store.AgentFile
	for p, data := range files {
		if CheckPath(p) != nil {
			continue
		}
		list = append(list, store.AgentFile{Path: p, Data: data})
	}
	a, err := m.store.CreateAgent(ctx, DefaultProject, name, list)
	if errors.Is(err, store.ErrConflict) {
		return nil
	}
	if err != nil {
		return err
	}
	m.log.Info("agent directory adopted into the store", "agent", name, "files", len(list))
	st := &syncState{Version: a.Version, Files: map[string]fileState{}}
	for _, f := range list {
		st.Files[f.Path] = fileState{Version: a.Version, SHA256: hashOf(f.Data)}
	}
	return writeSyncState(dir, st)
}
