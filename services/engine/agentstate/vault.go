package agentstate

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"sort"
	"sync"

	"github.com/BurntSushi/toml"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"gopkg.in/yaml.v3"
)

// vaultKeyRe is the shell's rule for environment variable names.
var vaultKeyRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`) })

const vaultHeader = `# The agent's vault: environment variables set in every command it runs.
# Values never reach the model, a log or a trace; only the names are shown
# to the model. Keep this file private (mode 0600).
# GITHUB_TOKEN: ghp_...
`

// ValidVaultKey reports whether name can be a vault key: a shell
// environment variable name.
func ValidVaultKey(name string) error {
	if !vaultKeyRe().MatchString(name) {
		return fmt.Errorf("invalid vault key %q: use letters, digits and \"_\", not starting with a digit", name)
	}
	return nil
}

// loadVault reads dir's vault and returns it with the path of the file it
// lives in, where changes are written back. The vault is .vault.yaml, a
// flat YAML mapping of names to values, or, in an agent directory
// PenguinHarness wrote, its .vault.toml, a flat TOML table of the same,
// read and written as it stands so the agent runs with its secrets. Both
// holding keys is refused: which would win is a guess nobody should have
// to make about secrets. An empty .vault.yaml beside a .vault.toml (Init
// writes one) is no vault.
func loadVault(dir string) (map[string]string, string, error) {
	yamlPath, tomlPath := filepath.Join(dir, VaultFile), filepath.Join(dir, referenceVaultFile)
	fromYAML, yamlFound, err := readVault(yamlPath, parseVault)
	if err != nil {
		return nil, "", err
	}
	fromTOML, tomlFound, err := readVault(tomlPath, parseTOMLVault)
	if err != nil {
		return nil, "", err
	}
	switch {
	case tomlFound && len(fromYAML) > 0:
		return nil, "", &agentconfig.ConfigError{File: tomlPath, Msg: fmt.Sprintf("%s holds a vault too: keep one of the two files (a NAME = \"value\" line of this one is a NAME: value line of the other)", yamlPath)}
	case tomlFound:
		return fromTOML, tomlPath, nil
	case !yamlFound:
		return map[string]string{}, yamlPath, nil
	}
	return fromYAML, yamlPath, nil
}

// readVault reads one vault file with parse, reporting whether it exists.
// It refuses a file that others can read, the way ssh refuses a readable
// private key, because a secret silently exposed is worse than a clear
// error.
func readVault(path string, parse func(string, []byte) (map[string]string, error)) (map[string]string, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("agent state: %w", err)
	}
	if runtime.GOOS != "windows" {
		info, err := os.Stat(path)
		if err != nil {
			return nil, false, fmt.Errorf("agent state: %w", err)
		}
		if perm := info.Mode().Perm(); perm&0o077 != 0 {
			return nil, false, &agentconfig.ConfigError{File: path, Msg: fmt.Sprintf("the vault is readable by others (mode %04o): run chmod 600 %s", perm, path)}
		}
	}
	v, err := parse(path, data)
	return v, true, err
}

// parseTOMLVault reads PenguinHarness's vault: NAME = "value" lines. A
// value that is not a string is refused; messages never quote a value.
func parseTOMLVault(path string, data []byte) (map[string]string, error) {
	var raw map[string]any
	if _, err := toml.Decode(string(data), &raw); err != nil {
		ce := &agentconfig.ConfigError{File: path, Msg: "not a TOML table of NAME = \"value\" lines"}
		var pe toml.ParseError
		if errors.As(err, &pe) {
			ce.Line = pe.Position.Line
		}
		return nil, ce
	}
	vault := make(map[string]string, len(raw))
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if err := ValidVaultKey(k); err != nil {
			errs = append(errs, &agentconfig.ConfigError{File: path, Msg: err.Error()})
			continue
		}
		v, ok := raw[k].(string)
		if !ok {
			errs = append(errs, &agentconfig.ConfigError{File: path, Field: k, Msg: "the value must be a string"})
			continue
		}
		vault[k] = v
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return vault, nil
}

func parseVault(path string, data []byte) (map[string]string, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, agentconfig.YAMLErrors(path, err, 0)
	}
	vault := map[string]string{}
	if root.Kind == 0 || len(root.Content) == 0 {
		return vault, nil
	}
	doc := root.Content[0]
	if doc.Kind == yaml.ScalarNode && doc.ShortTag() == "!!null" {
		return vault, nil
	}
	if doc.Kind != yaml.MappingNode {
		return nil, &agentconfig.ConfigError{File: path, Line: doc.Line, Msg: "expected a mapping of NAME: value"}
	}
	var errs []error
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		if err := ValidVaultKey(k.Value); err != nil {
			errs = append(errs, &agentconfig.ConfigError{File: path, Line: k.Line, Msg: err.Error()})
			continue
		}
		if _, dup := vault[k.Value]; dup {
			errs = append(errs, &agentconfig.ConfigError{File: path, Line: k.Line, Msg: fmt.Sprintf("key %q appears twice", k.Value)})
			continue
		}
		if v.Kind != yaml.ScalarNode {
			// The value is deliberately not quoted in the message.
			errs = append(errs, &agentconfig.ConfigError{File: path, Line: v.Line, Field: k.Value, Msg: "the value must be a string, not a list or a mapping"})
			continue
		}
		if v.ShortTag() == "!!null" {
			vault[k.Value] = "" // "KEY:" with nothing after it
			continue
		}
		vault[k.Value] = v.Value
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return vault, nil
}

// VaultKeys returns the vault's names, sorted.
func (s *State) VaultKeys() []string {
	keys := make([]string, 0, len(s.Vault))
	for k := range s.Vault {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// SetVault sets one vault variable and rewrites the vault file (mode
// 0600, replaced atomically).
func (s *State) SetVault(key, value string) error {
	if err := ValidVaultKey(key); err != nil {
		return err
	}
	next := maps.Clone(s.Vault)
	if next == nil {
		next = map[string]string{}
	}
	next[key] = value
	if err := writeVault(s.vaultPath(), next); err != nil {
		return err
	}
	s.Vault = next
	return nil
}

// RemoveVault removes one vault variable, reporting whether it existed.
func (s *State) RemoveVault(key string) (bool, error) {
	if _, ok := s.Vault[key]; !ok {
		return false, nil
	}
	next := maps.Clone(s.Vault)
	delete(next, key)
	if err := writeVault(s.vaultPath(), next); err != nil {
		return false, err
	}
	s.Vault = next
	return true, nil
}

// vaultPath is the file the vault lives in: the one it was read from, else
// .vault.yaml.
func (s *State) vaultPath() string {
	if s.vaultFile != "" {
		return s.vaultFile
	}
	return filepath.Join(s.Dir, VaultFile)
}

// writeVault writes vault to path, in TOML for PenguinHarness's .vault.toml
// and in YAML otherwise.
func writeVault(path string, vault map[string]string) error {
	data, err := EncodeVault(filepath.Base(path), vault)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, data, 0o600)
}

// EncodeVault returns the text of a vault file named name (.vault.yaml or
// .vault.toml) holding vault.
func EncodeVault(name string, vault map[string]string) ([]byte, error) {
	var b bytes.Buffer
	if name == referenceVaultFile {
		if err := toml.NewEncoder(&b).Encode(vault); err != nil {
			return nil, fmt.Errorf("agent state: encode vault: %w", err)
		}
		return b.Bytes(), nil
	}
	b.WriteString(vaultHeader)
	if len(vault) > 0 {
		// A yaml.Node keeps the keys sorted and quotes values as needed.
		n := &yaml.Node{Kind: yaml.MappingNode}
		keys := make([]string, 0, len(vault))
		for k := range vault {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			n.Content = append(n.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Value: k},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: vault[k]})
		}
		out, err := yaml.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("agent state: encode vault: %w", err)
		}
		b.Write(out)
	}
	return b.Bytes(), nil
}

// ParseVault reads the text of a vault file named name (.vault.yaml or
// .vault.toml). Its errors never quote a value.
func ParseVault(name string, data []byte) (map[string]string, error) {
	if name == referenceVaultFile {
		return parseTOMLVault(name, data)
	}
	return parseVault(name, data)
}
