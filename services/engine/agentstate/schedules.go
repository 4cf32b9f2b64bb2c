package agentstate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/penguin-agent/penguin/services/engine/schedule"
)

// The model manages the agent's schedules with the agent-file tools, as
// files schedule/<name>.yaml (package schedule): a write is validated
// first, and refused with the line and field of every problem, so an
// invalid definition never reaches the store; the engine replicas pick a
// valid one up within seconds.

// readSchedule reads one schedule file, or lists them.
func (f *Files) readSchedule(rest []string) (string, error) {
	if len(rest) == 0 {
		return f.scheduleListing(), nil
	}
	root, err := os.OpenRoot(filepath.Join(f.st.Dir))
	if err != nil {
		return "", fmt.Errorf("agent state: %w", err)
	}
	defer root.Close()
	return readIn(root, schedule.Dir+"/"+rest[0], schedule.Dir+"/"+rest[0])
}

// writeSchedule validates and writes the schedule file at p.
func (f *Files) writeSchedule(p, content string) error {
	name, err := scheduleName(p)
	if err != nil {
		return err
	}
	d, err := schedule.Parse(name, []byte(content))
	if err != nil {
		return refuse("the schedule was not saved: %v", err)
	}
	if d.Provider != "" && f.checkModel != nil {
		if err := f.checkModel(d.Provider, d.ModelID); err != nil {
			return refuse("the schedule was not saved: %s: model_id: %v", schedule.FileName(name), err)
		}
	}
	root, err := f.scheduleRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	return writeInRoot(root, name+schedule.Ext, []byte(content))
}

// deleteSchedule removes the schedule file at p.
func (f *Files) deleteSchedule(p string) error {
	name, err := scheduleName(p)
	if err != nil {
		return err
	}
	root, err := f.scheduleRoot()
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Remove(name + schedule.Ext); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return refuse("%s does not exist", p)
		}
		return fmt.Errorf("agent state: schedule: %w", err)
	}
	return nil
}

// scheduleName returns the schedule a path of the agent-file tools names.
func scheduleName(p string) (string, error) {
	parts, err := splitAgentPath(p)
	if err != nil {
		return "", err
	}
	if name, ok := schedule.NameOf(strings.Join(parts, "/")); ok && len(parts) == 2 {
		return name, nil
	}
	return "", refuse("%q is not a schedule file: %s/<name>%s, the name of letters, digits, '-' and '_'", p, schedule.Dir, schedule.Ext)
}

// scheduleRoot opens the agent's schedule directory, made when missing.
func (f *Files) scheduleRoot() (*os.Root, error) {
	dir := filepath.Join(f.st.Dir, schedule.Dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("agent state: schedule: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("agent state: schedule: %w", err)
	}
	return root, nil
}

// Schedules returns the agent's schedule files by name, read from its
// directory.
func (s *State) Schedules() map[string][]byte {
	out := map[string][]byte{}
	entries, err := os.ReadDir(filepath.Join(s.Dir, schedule.Dir))
	if err != nil {
		return out
	}
	for _, e := range entries {
		name, ok := schedule.NameOf(schedule.Dir + "/" + e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		if data, err := os.ReadFile(filepath.Join(s.Dir, schedule.Dir, e.Name())); err == nil {
			out[name] = data
		}
	}
	return out
}

// scheduleListing lists the schedules, one line each: its file, its
// cadence and whether it is on, or what is wrong with it.
func (f *Files) scheduleListing() string {
	return scheduleLines(f.st.Schedules(), "(no schedules yet)")
}

// scheduleLines describes schedule files, one line each, sorted by name.
func scheduleLines(files map[string][]byte, none string) string {
	if len(files) == 0 {
		return none
	}
	var lines []string
	for name, data := range files {
		line := "- " + schedule.FileName(name) + ": "
		d, err := schedule.Parse(name, data)
		switch {
		case err != nil:
			line += "invalid, does not fire: " + strings.ReplaceAll(err.Error(), "\n", "; ")
		case d.Enabled:
			line += d.Cadence() + ", enabled"
		default:
			line += d.Cadence() + ", disabled"
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}
