package agentstate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/dirstamp"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
)

// File and directory names inside an agent state directory.
const (
	ConfigFile = "system_config.yaml"
	AgentsFile = "AGENTS.md"
	SkillsDir  = "skills"
	SkillFile  = "SKILL.md"
	// DisabledSkillsDir, under skills/, holds disabled skills: loading an
	// agent skips hidden directories, so a disabled skill keeps its files
	// and reaches no prompt.
	DisabledSkillsDir = ".disabled"
	VaultFile         = ".vault.yaml"
	// referenceVaultFile is PenguinHarness's vault, read and
	// written in place when an agent directory has it (see loadVault).
	referenceVaultFile = ".vault.toml"
	MemoryDir          = "memory"
)

// State is one agent's state directory, loaded: its configuration, its
// instructions, its skills and its vault. An agent's whole behaviour lives
// in these editable files, so the same files serve a person editing them
// by hand and an agent improving itself.
//
// Reading methods may be called concurrently; SetVault and RemoveVault
// change the State and must not run alongside them. A session that wants a
// stable view loads its own State, or copies one (a shallow copy is enough
// to change agentconfig.Config for one session).
type State struct {
	// Dir is the absolute path of the directory.
	Dir string
	// Config is system_config.yaml, or the defaults when it is absent.
	Config agentconfig.Config
	// AgentsMD is the text of AGENTS.md; empty when absent.
	AgentsMD string
	// Skills are the skills found under skills/, sorted by name.
	Skills []Skill
	// Vault maps secret names to values. Values go only into command
	// environments, never into a prompt, a log or a trace.
	Vault map[string]string
	// vaultFile is the file Vault was read from, where SetVault and
	// RemoveVault write.
	vaultFile string
	// prompts are the system prompts built from the directory as Load
	// kept it, shared with every copy of it (see SystemPrompt); nil for a
	// State that was not kept.
	prompts *promptCache
}

// DefaultDir returns the default agent's state directory:
// $PENGUIN_HOME/agents/default, or penguin/agents/default under the user's
// data directory ($XDG_DATA_HOME, else ~/.local/share; the roaming
// application data directory on Windows).
func DefaultDir() string { return defaultDir(os.Getenv, os.UserHomeDir, os.UserConfigDir) }

func defaultDir(getenv func(string) string, home, config func() (string, error)) string {
	if h := getenv("PENGUIN_HOME"); h != "" {
		return filepath.Join(h, "agents", "default")
	}
	var base string
	switch {
	case getenv("XDG_DATA_HOME") != "":
		base = getenv("XDG_DATA_HOME")
	case runtime.GOOS == "windows":
		if d, err := config(); err == nil {
			base = d
		}
	default:
		if h, err := home(); err == nil && h != "" {
			base = filepath.Join(h, ".local", "share")
		}
	}
	if base == "" {
		// No home directory (a bare container): keep the state next to
		// the working directory rather than in a temporary one.
		return filepath.Join(".penguin", "agents", "default")
	}
	return filepath.Join(base, "penguin", "agents", "default")
}

// Load reads an agent state directory. Missing files take their defaults
// (no system_config.yaml means Default(), no AGENTS.md means no
// instructions, and so on); a file that is present but malformed is an
// error that names the file and, where it can, the line.
//
// The engine loads its agent at every session's creation and every run,
// so a directory whose stamp (see package dirstamp), taken at its last
// load, still holds is not read again: its State is copied from that
// load. Any change to the directory, by this process or another, or by
// hand, makes the stamp not hold, and the next Load reads the files.
func Load(dir string) (*State, error) {
	return LoadHeld(dir, dirstamp.Stamp{})
}

// LoadHeld is Load for a directory whose stamp the caller has just found
// to hold (held; zero when it has none): the agent mirror's Sync checks
// its working copy's stamp right before the copy is loaded, and a State
// kept with a stamp equal to it is handed out without stating the
// directory's entries a second time. The copy is as Sync found it, or
// changed since by a write that Load's own check could have missed as
// well had it come a moment later.
func LoadHeld(dir string, held dirstamp.Stamp) (*State, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("agent state %s: %w", dir, err)
	}
	if s, ok := loadedStates.get(abs, func(kept dirstamp.Stamp) bool { return kept.Equal(held) || kept.Holds(abs) }); ok {
		return s, nil
	}
	// The stamp is taken before the files are read: a change made while
	// they are read makes it not hold.
	stamp, trusted := dirstamp.Take(abs)
	s, err := load(abs)
	if err != nil {
		return nil, err
	}
	if trusted {
		s.prompts = new(promptCache)
		loadedStates.put(abs, stamp, s)
	}
	return s, nil
}

// loadedStates keeps the last State loaded from each directory with the
// directory's stamp at the time: one entry per agent directory in use.
var loadedStates = &lastByPath[dirstamp.Stamp, *State]{clone: (*State).clone}

// clone copies s deeply enough that changing the copy (its configuration
// for one session, its vault) leaves s as it is.
func (s *State) clone() *State {
	c := *s
	c.Config = s.Config.Clone()
	c.Skills = slices.Clone(s.Skills)
	c.Vault = maps.Clone(s.Vault)
	return &c
}

// load reads the agent state directory abs.
func load(abs string) (*State, error) {
	var err error
	s := &State{Dir: abs}
	if s.Config, err = loadConfig(filepath.Join(abs, ConfigFile)); err != nil {
		return nil, err
	}
	agents, err := os.ReadFile(filepath.Join(abs, AgentsFile))
	switch {
	case err == nil:
		s.AgentsMD = string(agents)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("agent state: %w", err)
	}
	if s.Skills, err = loadSkills(filepath.Join(abs, SkillsDir)); err != nil {
		return nil, err
	}
	if s.Vault, s.vaultFile, err = loadVault(abs); err != nil {
		return nil, err
	}
	return s, nil
}

// Init creates an agent state directory with the default configuration, an
// empty skills directory and an empty vault (mode 0600). AGENTS.md is left
// absent. It never overwrites: a file that exists is kept as it is, so Init
// is safe to run on every start. It returns the loaded state.
func Init(dir string) (*State, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("agent state %s: %w", dir, err)
	}
	if err := os.MkdirAll(filepath.Join(abs, SkillsDir), 0o755); err != nil {
		return nil, fmt.Errorf("agent state: %w", err)
	}
	if err := createFile(filepath.Join(abs, ConfigFile), []byte(agentconfig.DefaultYAML()), 0o644); err != nil {
		return nil, err
	}
	// An agent directory with PenguinHarness's vault keeps it as its only
	// vault.
	if _, err := os.Stat(filepath.Join(abs, referenceVaultFile)); errors.Is(err, fs.ErrNotExist) {
		if err := createFile(filepath.Join(abs, VaultFile), []byte(vaultHeader), 0o600); err != nil {
			return nil, err
		}
	}
	return Load(abs)
}

// createFile writes a new file, leaving an existing one untouched.
func createFile(path string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agent state: %w", err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("agent state: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		os.Remove(path)
		return fmt.Errorf("agent state: write %s: %w", path, err)
	}
	return nil
}

// loadConfig reads system_config.yaml over the defaults: keys left out
// keep their default values. Unknown keys are errors, so a typo never
// silently leaves a default in place.
//
// The file is read every time, so an edit applies to the next session,
// but parsing it is done once per content (see parsedConfigs).
func loadConfig(path string) (agentconfig.Config, error) {
	c := agentconfig.Default()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("agent state: %w", err)
	}
	if cached, ok := parsedConfigs.get(path, func(kept []byte) bool { return bytes.Equal(kept, data) }); ok {
		return cached, nil
	}
	c, err = agentconfig.Parse(path, data)
	if err != nil {
		return c, err
	}
	parsedConfigs.put(path, data, c)
	return c, nil
}

// parsedConfigs keeps the last configuration parsed from each file with
// the bytes it was parsed from. Every session loads its agent's state, and
// parsing the YAML was most of a session's creation (about 140 KB of
// garbage and 0.7 ms of CPU each); comparing the bytes read against the
// cached ones is far cheaper, and still notices every edit. It serves
// where loadedStates cannot (a directory whose stamp is not trusted). It
// holds one entry per agent directory in use.
var parsedConfigs = &lastByPath[[]byte, agentconfig.Config]{clone: agentconfig.Config.Clone}

// lastByPath keeps, for each path, the last value derived from it and
// what it was derived from (its source: the bytes read, a stamp), and
// hands out copies of the value while the source still holds. The copies
// are clone's, so that a caller may change its own.
type lastByPath[S, V any] struct {
	clone func(V) V
	mu    sync.Mutex
	m     map[string]derived[S, V]
}

type derived[S, V any] struct {
	source S
	value  V
}

// get returns a copy of the value kept for path, if holds says its
// source still holds.
func (c *lastByPath[S, V]) get(path string, holds func(S) bool) (V, bool) {
	c.mu.Lock()
	e, ok := c.m[path]
	c.mu.Unlock()
	if !ok || !holds(e.source) {
		var zero V
		return zero, false
	}
	return c.clone(e.value), true
}

func (c *lastByPath[S, V]) put(path string, source S, value V) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]derived[S, V]{}
	}
	c.m[path] = derived[S, V]{source: source, value: c.clone(value)}
	c.mu.Unlock()
}

// WriteConfig validates c and writes it as dir's system_config.yaml,
// replacing the file atomically. Comments of a hand-edited file are not
// kept.
func WriteConfig(dir string, c agentconfig.Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	data, err := agentconfig.Marshal(c)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ConfigFile), data, 0o644)
}

// writeFileAtomic writes data to a temporary file beside path and renames
// it into place, so a reader never sees half a file and a crash leaves the
// old one.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agent state: %w", err)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("agent state: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("agent state: write %s: %w", path, err)
	}
	if err := f.Chmod(perm); err != nil {
		return fail(err)
	}
	if _, err := f.Write(data); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("agent state: write %s: %w", path, err)
	}
	return nil
}

// ToolConfig returns the environment's tool configuration for this agent;
// see ToolSettings.ToolConfig.
func (s *State) ToolConfig() *penguinv1.ToolConfig { return s.Config.Tools.ToolConfig() }

// AgentID is the agent's id: the name of its directory, or of the parent
// when the directory is called agent_state (PenguinHarness's layout).
func (s *State) AgentID() string {
	base := filepath.Base(s.Dir)
	if base == "agent_state" {
		return filepath.Base(filepath.Dir(s.Dir))
	}
	return base
}
