package agentstate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"sync"

	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// File and directory names inside an agent state directory.
const (
	ConfigFile = "system_config.yaml"
	AgentsFile = "AGENTS.md"
	SkillsDir  = "skills"
	SkillFile  = "SKILL.md"
	VaultFile  = ".vault.yaml"
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
// to change Config for one session).
type State struct {
	// Dir is the absolute path of the directory.
	Dir string
	// Config is system_config.yaml, or the defaults when it is absent.
	Config Config
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
func Load(dir string) (*State, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("agent state %s: %w", dir, err)
	}
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
	if err := createFile(filepath.Join(abs, ConfigFile), []byte(defaultConfigYAML()), 0o644); err != nil {
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
func loadConfig(path string) (Config, error) {
	c := Default()
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("agent state: %w", err)
	}
	if cached, ok := parsedConfigs.get(path, data); ok {
		return cached, nil
	}
	if err := parseConfig(path, data, &c); err != nil {
		return c, err
	}
	parsedConfigs.put(path, data, c)
	return c, nil
}

// parsedConfigs keeps the last configuration parsed from each file with
// the bytes it was parsed from. Every session loads its agent's state, and
// parsing the YAML was most of a session's creation (about 140 KB of
// garbage and 0.7 ms of CPU each); comparing the bytes read against the
// cached ones is far cheaper, and still notices every edit. It holds one
// entry per agent directory in use.
var parsedConfigs = &configCache{m: map[string]cachedConfig{}}

type configCache struct {
	mu sync.Mutex
	m  map[string]cachedConfig
}

type cachedConfig struct {
	data []byte
	cfg  Config
}

// get returns a copy of the configuration parsed from exactly data at
// path, if it is cached.
func (c *configCache) get(path string, data []byte) (Config, bool) {
	c.mu.Lock()
	e, ok := c.m[path]
	c.mu.Unlock()
	if !ok || !bytes.Equal(e.data, data) {
		return Config{}, false
	}
	return e.cfg.clone(), true
}

func (c *configCache) put(path string, data []byte, cfg Config) {
	c.mu.Lock()
	c.m[path] = cachedConfig{data: data, cfg: cfg.clone()}
	c.mu.Unlock()
}

// clone returns a copy of c whose lists and maps (the tool lists, the MCP
// servers' arguments, environment and headers) are its own, so that a
// caller appending to or setting them cannot change the cached
// configuration. The optional numbers of a tool's settings stay shared
// pointers; nothing writes through them.
func (c Config) clone() Config {
	c.Tools.Builtin = slices.Clone(c.Tools.Builtin)
	c.Tools.Custom = slices.Clone(c.Tools.Custom)
	c.Tools.MCPServers = slices.Clone(c.Tools.MCPServers)
	for i := range c.Tools.MCPServers {
		m := &c.Tools.MCPServers[i]
		m.Args, m.Env, m.Headers = slices.Clone(m.Args), maps.Clone(m.Env), maps.Clone(m.Headers)
	}
	return c
}

// ParseConfig reads a configuration from YAML over the defaults and
// validates it; name is used in errors.
func ParseConfig(name string, data []byte) (Config, error) {
	c := Default()
	err := parseConfig(name, data, &c)
	return c, err
}

func parseConfig(name string, data []byte, c *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return yamlErrors(name, err, 0)
	}
	if root.Kind == 0 || (root.Kind == yaml.DocumentNode && len(root.Content) == 0) {
		return nil // an empty file: every key takes its default
	}
	doc := root.Content[0]
	if doc.Kind == yaml.ScalarNode && doc.ShortTag() == "!!null" {
		return nil // only a document marker or comments
	}
	if doc.Kind != yaml.MappingNode {
		return &ConfigError{File: name, Line: doc.Line, Msg: "expected a mapping of keys such as system_prompt and model"}
	}
	// PenguinHarness's spelling becomes Penguin's before decoding (see
	// spelling.go); errors name the keys as the file writes them.
	written, spellErr := respell(doc)
	keysErr := errors.Join(knownKeys(doc, reflect.TypeFor[Config](), "")...)
	var decodeErr error
	if err := root.Decode(c); err != nil {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return yamlErrors(name, err, 0)
		}
		// The decoder went on past type errors, leaving defaults where it
		// failed, so validating the rest reports every problem at once.
		decodeErr = nameFields(yamlErrors(name, err, 0), &root)
	}
	// No list and an empty one mean the same for custom tools and MCP
	// servers (unlike builtin, where an empty list is refused), so both
	// read as none and a file written back says the same.
	if len(c.Tools.Custom) == 0 {
		c.Tools.Custom = nil
	}
	if len(c.Tools.MCPServers) == 0 {
		c.Tools.MCPServers = nil
	}
	upgradeSections(c)
	// The spelling's problems name the keys as written already; the rest
	// name them in the rewritten document.
	var spelled, rest error
	if spellErr != nil {
		spelled = locate(spellErr, name, &root)
	}
	if err := errors.Join(keysErr, decodeErr, c.Validate()); err != nil {
		rest = asWritten(locate(err, name, &root), written)
	}
	return errors.Join(spelled, rest)
}

// locate fills in the file and line of validation errors.
func locate(err error, file string, root *yaml.Node) error {
	list := flatten(err)
	out := make([]error, 0, len(list))
	for _, e := range list {
		var ce *ConfigError
		if errors.As(e, &ce) {
			c := *ce
			c.File = file
			if c.Line == 0 && c.Field != "" {
				c.Line = lineOf(root, c.Field)
			}
			out = append(out, &c)
			continue
		}
		out = append(out, fmt.Errorf("%s: %w", file, e))
	}
	return errors.Join(out...)
}

// WriteConfig validates c and writes it as dir's system_config.yaml,
// replacing the file atomically. Comments of a hand-edited file are not
// kept.
func WriteConfig(dir string, c Config) error {
	if err := c.Validate(); err != nil {
		return err
	}
	data, err := marshalConfig(c)
	if err != nil {
		return err
	}
	return writeFileAtomic(filepath.Join(dir, ConfigFile), data, 0o644)
}

func marshalConfig(c Config) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("agent state: encode config: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("agent state: encode config: %w", err)
	}
	return b.Bytes(), nil
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
