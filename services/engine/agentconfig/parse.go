package agentconfig

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"

	"gopkg.in/yaml.v3"
)

// Parse reads a configuration from YAML over the defaults and
// validates it; name is used in errors.
func Parse(name string, data []byte) (Config, error) {
	c := Default()
	err := parseConfig(name, data, &c)
	return c, err
}

func parseConfig(name string, data []byte, c *Config) error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return YAMLErrors(name, err, 0)
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
			return YAMLErrors(name, err, 0)
		}
		// The decoder went on past type errors, leaving defaults where it
		// failed, so validating the rest reports every problem at once.
		decodeErr = nameFields(YAMLErrors(name, err, 0), &root)
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

// Clone returns a copy of c whose lists and maps (the tool lists, the MCP
// servers' arguments, environment and headers) are its own, so that a
// caller appending to or setting them cannot change the cached
// configuration. The optional numbers of a tool's settings stay shared
// pointers; nothing writes through them.
func (c Config) Clone() Config {
	c.Tools.Builtin = slices.Clone(c.Tools.Builtin)
	c.Tools.Custom = slices.Clone(c.Tools.Custom)
	c.Tools.MCPServers = slices.Clone(c.Tools.MCPServers)
	for i := range c.Tools.MCPServers {
		m := &c.Tools.MCPServers[i]
		m.Args, m.Env, m.Headers = slices.Clone(m.Args), maps.Clone(m.Env), maps.Clone(m.Headers)
	}
	return c
}

// Marshal writes c as YAML, two spaces to a level.
func Marshal(c Config) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(c); err != nil {
		return nil, fmt.Errorf("agent config: encode: %w", err)
	}
	if err := enc.Close(); err != nil {
		return nil, fmt.Errorf("agent config: encode: %w", err)
	}
	return b.Bytes(), nil
}
