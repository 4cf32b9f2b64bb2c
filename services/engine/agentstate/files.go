package agentstate

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/schedule"
)

// The paths by which the model reaches the agent's own files through the
// agent-file tools (read_agent_file, write_agent_file,
// delete_agent_file). They are relative to the agent state directory but
// name no directory of any host: the engine owns these files, and the
// environment, which may run on another host, never sees them.
// agentconfig owns them, since the default tools' descriptions name them.
const (
	UserMemoryPath      = agentconfig.UserMemoryPath
	WorkspaceMemoryPath = agentconfig.WorkspaceMemoryPath
)

// Bounds of what the agent-file tools read and write.
const (
	// MaxAgentFileRead is the most of one file a read returns.
	MaxAgentFileRead = 256 << 10
	// MaxMemoryFileBytes is the largest memory file the model may write:
	// a topic is a few facts, and the index reaches every prompt.
	MaxMemoryFileBytes = 64 << 10
	// MaxMemoryScopeBytes and MaxMemoryScopeFiles bound one memory scope
	// (the user's, or one workspace's) as a whole, so that a model in a
	// loop cannot fill the engine's disk.
	MaxMemoryScopeBytes = 1 << 20
	MaxMemoryScopeFiles = 256
)

// ErrAgentFile marks a request of the agent-file tools that names no file
// they may touch, or would break a bound; its message is for the model.
var ErrAgentFile = errors.New("agent file")

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrAgentFile, fmt.Sprintf(format, args...))
}

// memoryFileName is what a memory file may be called: a Markdown file
// directly in its scope, its name plain enough for any filesystem. Hidden
// names (the scope's .workspace marker, temporary files) never match.
var memoryFileName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}\.md$`) })

// ValidMemoryFileName reports whether name can name a memory file.
func ValidMemoryFileName(name string) bool { return memoryFileName().MatchString(name) }

// Files is the part of an agent's state one session's model may reach:
// AGENTS.md and the skills to read, and the user's and the workspace's
// memory to read and write. Nothing else is reachable: not
// system_config.yaml, not the vault, not the memory of other workspaces.
// Every access goes through an os.Root handle, so neither "..", an
// absolute path nor a symbolic link leads outside the area it names.
type Files struct {
	st *State
	// workspace is the session's workspace; empty when it has no
	// workspace memory (a temporary workspace).
	workspace string
	// checkModel, when set, refuses a schedule's model the session's
	// project cannot call (see WithModelCheck).
	checkModel func(provider, modelID string) error
}

// Files returns the agent files of a session in workspace; an empty
// workspace has no workspace memory.
func (s *State) Files(workspace string) *Files { return &Files{st: s, workspace: workspace} }

// WithModelCheck makes a schedule written through f name a model that
// check accepts, so that the model's own schedules are refused at the
// write, as people's are through ScheduleService, rather than failing
// when they fire.
func (f *Files) WithModelCheck(check func(provider, modelID string) error) *Files {
	f.checkModel = check
	return f
}

// Read returns the text of the file at p, or, for a directory, a listing
// of it. A file longer than MaxAgentFileRead is cut, with a note.
func (f *Files) Read(p string) (string, error) {
	parts, err := splitAgentPath(p)
	if err != nil {
		return "", err
	}
	switch {
	case len(parts) == 0:
		return f.topListing(), nil
	case len(parts) == 1 && parts[0] == AgentsFile:
		if f.st.AgentsMD == "" {
			return "(AGENTS.md is empty)", nil
		}
		return f.st.AgentsMD, nil
	case parts[0] == SkillsDir:
		return f.readSkill(parts[1:])
	case parts[0] == schedule.Dir && len(parts) <= 2:
		return f.readSchedule(parts[1:])
	case parts[0] == MemoryDir:
		if len(parts) == 1 {
			return f.memoryListing(), nil
		}
		root, err := f.memoryRoot(parts[1], false)
		if err != nil {
			return "", err
		}
		if root == nil {
			return "(nothing saved yet)", nil
		}
		defer root.Close()
		return readIn(root, path.Join(parts[2:]...), p)
	}
	return "", refuse("%q is not an agent file: the agent files are AGENTS.md, skills/, memory/ and schedule/", p)
}

// Write replaces (or creates) the memory file at p with content, within
// the bounds of MaxMemoryFileBytes per file and MaxMemoryScopeBytes and
// MaxMemoryScopeFiles per scope. The file is replaced atomically.
func (f *Files) Write(p, content string) error {
	if isSchedulePath(p) {
		return f.writeSchedule(p, content)
	}
	root, name, err := f.memoryFile(p)
	if err != nil {
		return err
	}
	defer root.Close()
	if len(content) > MaxMemoryFileBytes {
		return refuse("%d bytes is more than a memory file may hold (%d); split the topic or keep only what matters", len(content), MaxMemoryFileBytes)
	}
	if !utf8.ValidString(content) {
		return refuse("the content is not valid UTF-8 text")
	}
	files, total, err := scopeUsage(root)
	if err != nil {
		return fmt.Errorf("agent state: memory: %w", err)
	}
	if old, ok := files[name]; ok {
		total -= old
	} else if len(files) >= MaxMemoryScopeFiles {
		return refuse("this memory scope already holds %d files, the most it may; merge or delete topics first", len(files))
	}
	if total+int64(len(content)) > MaxMemoryScopeBytes {
		return refuse("this memory scope would hold %d bytes, more than its bound of %d; shorten or delete topics first", total+int64(len(content)), MaxMemoryScopeBytes)
	}
	return writeInRoot(root, name, []byte(content))
}

// Delete removes the memory file at p.
func (f *Files) Delete(p string) error {
	if isSchedulePath(p) {
		return f.deleteSchedule(p)
	}
	root, name, err := f.memoryFile(p)
	if err != nil {
		return err
	}
	defer root.Close()
	if err := root.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return refuse("%s does not exist", p)
		}
		return fmt.Errorf("agent state: memory: %w", err)
	}
	return nil
}

// memoryFile opens the scope of a memory file the model may write and
// checks its name.
func (f *Files) memoryFile(p string) (*os.Root, string, error) {
	parts, err := splitAgentPath(p)
	if err != nil {
		return nil, "", err
	}
	if len(parts) != 3 || parts[0] != MemoryDir {
		return nil, "", refuse("only memory and schedule files can be written or deleted: %s/<name>.md, %s/<name>.md or %s/<name>%s", UserMemoryPath, WorkspaceMemoryPath, schedule.Dir, schedule.Ext)
	}
	if !memoryFileName().MatchString(parts[2]) {
		return nil, "", refuse("%q is not a memory file name: a Markdown file (.md) named with letters, digits, '.', '_' and '-'", parts[2])
	}
	root, err := f.memoryRoot(parts[1], true)
	if err != nil {
		return nil, "", err
	}
	return root, parts[2], nil
}

// memoryRoot opens a memory scope ("user" or "workspace") beneath the
// agent directory. With create, a missing scope is made (see
// PrepareMemory); without, a missing scope is nil.
func (f *Files) memoryRoot(scope string, create bool) (*os.Root, error) {
	var dir string
	switch scope {
	case memoryUserScope:
		dir = memoryUserScope
	case path.Base(WorkspaceMemoryPath):
		if f.workspace == "" {
			return nil, refuse("this session's workspace is temporary and has no workspace memory; use %s", UserMemoryPath)
		}
		dir = MemoryKey(f.workspace)
	default:
		return nil, refuse("there is no memory scope %q: use %s or %s", scope, UserMemoryPath, WorkspaceMemoryPath)
	}
	if !f.st.Config.Memory.Enabled {
		return nil, refuse("memory is turned off for this agent")
	}
	if create {
		if err := f.st.PrepareMemory(f.workspace, f.workspace == ""); err != nil {
			return nil, err
		}
	}
	agent, err := os.OpenRoot(f.st.Dir)
	if err != nil {
		return nil, fmt.Errorf("agent state: %w", err)
	}
	defer agent.Close()
	root, err := agent.OpenRoot(path.Join(MemoryDir, dir))
	if errors.Is(err, fs.ErrNotExist) && !create {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent state: memory: %w", err)
	}
	return root, nil
}

// readSkill reads within one installed skill's directory. The directory
// itself may be a link (an operator installs skills that way); nothing
// within it leads outside it.
func (f *Files) readSkill(rest []string) (string, error) {
	if len(rest) == 0 {
		return f.skillListing(), nil
	}
	i := slices.IndexFunc(f.st.Skills, func(sk Skill) bool { return sk.Dir == rest[0] })
	if i < 0 {
		return "", refuse("there is no skill %q; read %s for the list", rest[0], SkillsDir)
	}
	root, err := os.OpenRoot(filepath.Join(f.st.Dir, SkillsDir, rest[0]))
	if err != nil {
		return "", fmt.Errorf("agent state: skill %s: %w", rest[0], err)
	}
	defer root.Close()
	return readIn(root, path.Join(rest[1:]...), path.Join(append([]string{SkillsDir}, rest...)...))
}

// readIn reads a file, or lists a directory, beneath root; shown is the
// path the model asked for.
func readIn(root *os.Root, name, shown string) (string, error) {
	if name == "" {
		name = "."
	}
	file, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", refuse("%s does not exist", shown)
	}
	if err != nil {
		return "", refuse("%s cannot be read: %v", shown, errors.Unwrap(err))
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return "", fmt.Errorf("agent state: %w", err)
	}
	if info.IsDir() {
		return listDir(file, shown)
	}
	if !info.Mode().IsRegular() {
		return "", refuse("%s is not a regular file", shown)
	}
	data, err := io.ReadAll(io.LimitReader(file, MaxAgentFileRead+1))
	if err != nil {
		return "", fmt.Errorf("agent state: %w", err)
	}
	text := string(data)
	if len(data) > MaxAgentFileRead {
		text = strings.ToValidUTF8(string(data[:MaxAgentFileRead]), "") +
			fmt.Sprintf("\n[%s is longer than %d bytes; the rest is not shown]", shown, MaxAgentFileRead)
	}
	if text == "" {
		return fmt.Sprintf("(%s is empty)", shown), nil
	}
	return text, nil
}

// listDir lists a directory's visible entries, directories with a slash.
func listDir(dir *os.File, shown string) (string, error) {
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return "", fmt.Errorf("agent state: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		name := e.Name()
		if e.IsDir() {
			name += "/"
		} else if info, err := e.Info(); err == nil {
			name += fmt.Sprintf(" (%d bytes)", info.Size())
		}
		names = append(names, "- "+name)
	}
	if len(names) == 0 {
		return fmt.Sprintf("(%s is empty)", shown), nil
	}
	slices.Sort(names)
	return strings.Join(names, "\n"), nil
}

func (f *Files) topListing() string {
	lines := []string{"- " + AgentsFile + ": the agent's instructions (read only)", "- " + SkillsDir + "/: installed skills (read only)"}
	if f.st.Config.Memory.Enabled {
		lines = append(lines, "- "+MemoryDir+"/: what you keep across sessions")
	}
	lines = append(lines, "- "+schedule.Dir+"/: timed tasks, one "+schedule.Ext+" file each")
	return strings.Join(lines, "\n")
}

func (f *Files) skillListing() string {
	if len(f.st.Skills) == 0 {
		return "(no skills installed)"
	}
	return skillMetadata(f.st.Skills)
}

func (f *Files) memoryListing() string {
	if !f.st.Config.Memory.Enabled {
		return "(memory is turned off for this agent)"
	}
	lines := []string{"- " + UserMemoryPath + "/: true wherever you work"}
	if f.workspace != "" {
		lines = append(lines, "- "+WorkspaceMemoryPath+"/: true of this workspace only")
	}
	return strings.Join(lines, "\n")
}

// splitAgentPath splits a path of the agent-file tools into its
// components, refusing absolute paths, "..", and hidden names (the vault,
// markers, temporary files). "" and "." are the top.
func splitAgentPath(p string) ([]string, error) {
	if strings.ContainsRune(p, '\\') || strings.ContainsRune(p, 0) {
		return nil, refuse("%q: write agent paths with forward slashes, such as %s/MEMORY.md", p, UserMemoryPath)
	}
	if strings.HasPrefix(p, "/") || filepath.IsAbs(p) || filepath.VolumeName(p) != "" {
		return nil, refuse("%q is absolute: agent paths are relative, such as %s/MEMORY.md or %s/<name>/%s", p, UserMemoryPath, SkillsDir, SkillFile)
	}
	var parts []string
	for _, c := range strings.Split(p, "/") {
		switch {
		case c == "" || c == ".":
			continue
		case c == "..":
			return nil, refuse("%q leaves the agent files: \"..\" is not allowed", p)
		case strings.HasPrefix(c, "."):
			return nil, refuse("%q names a hidden file, which the agent-file tools do not reach", p)
		}
		parts = append(parts, c)
	}
	return parts, nil
}

// scopeUsage returns the sizes of the files of a memory scope and their
// total.
func scopeUsage(root *os.Root) (map[string]int64, int64, error) {
	dir, err := root.Open(".")
	if err != nil {
		return nil, 0, err
	}
	defer dir.Close()
	entries, err := dir.ReadDir(-1)
	if err != nil {
		return nil, 0, err
	}
	files := map[string]int64{}
	var total int64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		files[e.Name()] = info.Size()
		total += info.Size()
	}
	return files, total, nil
}

// writeInRoot writes a file beneath root atomically: a temporary file
// beside it, renamed into place.
func writeInRoot(root *os.Root, name string, data []byte) error {
	var suffix [6]byte
	_, _ = rand.Read(suffix[:])
	tmp := "." + name + ".tmp-" + hex.EncodeToString(suffix[:])
	file, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("agent state: memory: %w", err)
	}
	fail := func(err error) error {
		file.Close()
		_ = root.Remove(tmp)
		return fmt.Errorf("agent state: memory: %w", err)
	}
	if _, err := file.Write(data); err != nil {
		return fail(err)
	}
	if err := file.Sync(); err != nil {
		return fail(err)
	}
	if err := file.Close(); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("agent state: memory: %w", err)
	}
	if err := root.Rename(tmp, name); err != nil {
		_ = root.Remove(tmp)
		return fmt.Errorf("agent state: memory: %w", err)
	}
	return nil
}

// isSchedulePath reports whether p is under the schedule directory.
func isSchedulePath(p string) bool {
	return strings.HasPrefix(strings.TrimPrefix(p, "./"), schedule.Dir+"/")
}
