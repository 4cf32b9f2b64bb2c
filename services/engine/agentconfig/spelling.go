package agentconfig

import (
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// The two spellings of system_config.yaml.
//
// An agent directory written for PenguinHarness, the TypeScript harness
// Penguin was modelled on, loads unchanged. Where that harness spells a
// setting differently, Penguin's spelling is the canonical one: Init and
// WriteConfig write it and docs/configuration.md describes it, and
// PenguinHarness's spelling is read as its alias:
//
//	Penguin's spelling               PenguinHarness's spelling
//	model.request_timeout_ms         model.timeoutMs
//	compaction.context_threshold     compaction.max_context_length
//	compaction.turns_threshold       compaction.max_session_turns
//	tools.mcp_servers: [{name, …}]   tools.mcpServers: [{name, config: {…}}]
//	for_model, timeout_ms,           forModel, timeoutMs, maxOutputLength
//	max_output_length (tool entries)
//	connect_timeout_ms, timeout_ms,  connectTimeoutMs, timeoutMs,
//	max_output_length (MCP servers)  maxOutputLength
//
// tools.mcpServers (or mcp_servers) may also be a mapping from server name
// to its settings, the shape MCP servers' READMEs give ({"mcpServers":
// {"github": {"command": …}}}), where "type" names the transport.
//
// A file uses one spelling throughout. A key written in the other spelling
// than the file's first such key is refused, naming both: a person reading
// a file that says max_context_length in one place and turns_threshold in
// another should not have to know that the two belong together, and a
// setting written twice, once each way, would leave them guessing which
// wins. Keys that exist in one spelling only (retry and compaction.enabled
// are Penguin's, kernel_version and schedules PenguinHarness's) fit
// either.
//
// The spelling is settled on the parsed document before it is decoded, so
// every error keeps the line of the key as written. Decoding a yaml.Node
// cannot refuse unknown keys (yaml.v3 offers that only on a Decoder of
// bytes), so knownKeys does that check itself, from the Config type's yaml
// tags.

// alias is one setting with a key in each spelling.
type alias struct{ ours, theirs string }

var (
	modelAliases      = []alias{{"request_timeout_ms", "timeoutMs"}}
	compactionAliases = []alias{{"context_threshold", "max_context_length"}, {"turns_threshold", "max_session_turns"}}
	toolsAliases      = []alias{{"mcp_servers", "mcpServers"}}
	toolAliases       = []alias{{"for_model", "forModel"}, {"timeout_ms", "timeoutMs"}, {"max_output_length", "maxOutputLength"}}
	mcpAliases        = []alias{{"connect_timeout_ms", "connectTimeoutMs"}, {"timeout_ms", "timeoutMs"}, {"max_output_length", "maxOutputLength"}}
)

// A spelling is Penguin's or PenguinHarness's.
type spelling int

const (
	penguinSpelling spelling = iota
	referenceSpelling
)

func (s spelling) String() string {
	if s == referenceSpelling {
		return "PenguinHarness's spelling"
	}
	return "Penguin's spelling"
}

// keyAt is a key as written: its path in the file and its line.
type keyAt struct {
	path string
	line int
}

// speller rewrites a parsed system_config.yaml into Penguin's spelling in
// place, collecting the problems it finds.
type speller struct {
	// first is the first key of each spelling met so far.
	first [2]*keyAt
	errs  []error
	// written maps a key path of the rewritten document to the path as
	// written in the file, so errors name the key the person wrote.
	written map[string]string
}

// respell rewrites doc, the document's top mapping, into Penguin's
// spelling and returns the problems found (ConfigErrors without a file)
// and the map of rewritten paths to written ones.
func respell(doc *yaml.Node) (map[string]string, error) {
	z := &speller{written: map[string]string{}}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		k, v := doc.Content[i], doc.Content[i+1]
		switch k.Value {
		case "model":
			z.rename(v, "model", "model", modelAliases)
		case "compaction":
			z.rename(v, "compaction", "compaction", compactionAliases)
		case "tools":
			z.tools(v)
		}
	}
	return z.written, errors.Join(z.errs...)
}

func (z *speller) fail(line int, path, format string, args ...any) {
	z.errs = append(z.errs, &ConfigError{Line: line, Field: path, Msg: fmt.Sprintf(format, args...)})
}

// mark records a key of spelling sp and reports whether it fits the file:
// false when a key of the other spelling came first (the problem is then
// recorded, naming both).
func (z *speller) mark(sp spelling, path, other string, line int) bool {
	if z.first[sp] == nil {
		z.first[sp] = &keyAt{path, line}
	}
	o := z.first[1-sp]
	if o == nil {
		return true
	}
	z.fail(line, path, "this is %s, but the file uses %s (%s at line %d): write %s here, or %s throughout",
		sp, 1-sp, o.path, o.line, other, sp)
	return false
}

// rename rewrites the keys of mapping n (at path in the rewritten
// document, wpath as written) into Penguin's spelling. A key that breaks
// the file's spelling is dropped after its problem is recorded, so it is
// not reported again as unknown or duplicate.
func (z *speller) rename(n *yaml.Node, path, wpath string, aliases []alias) {
	if n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); {
		k := n.Content[i]
		keep := true
		for _, a := range aliases {
			switch k.Value {
			case a.theirs:
				if keep = z.mark(referenceSpelling, wpath+"."+a.theirs, a.ours, k.Line); keep {
					k.Value = a.ours
					z.written[path+"."+a.ours] = wpath + "." + a.theirs
				}
			case a.ours:
				keep = z.mark(penguinSpelling, wpath+"."+a.ours, a.theirs, k.Line)
			default:
				continue
			}
			break
		}
		if !keep {
			n.Content = append(n.Content[:i], n.Content[i+2:]...)
			continue
		}
		if _, ok := z.written[path+"."+k.Value]; !ok {
			z.written[path+"."+k.Value] = wpath + "." + k.Value
		}
		i += 2
	}
}

func (z *speller) tools(n *yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return
	}
	var servers *yaml.Node
	wservers := ""
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k := n.Content[i]; k.Value == "mcp_servers" || k.Value == "mcpServers" {
			wservers = "tools." + k.Value
		}
	}
	z.rename(n, "tools", "tools", toolsAliases)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch k.Value {
		case "builtin", "custom":
			if v.Kind != yaml.SequenceNode {
				continue
			}
			for j, e := range v.Content {
				p := fmt.Sprintf("tools.%s[%d]", k.Value, j)
				z.rename(e, p, p, toolAliases)
			}
		case "mcp_servers":
			servers = v
		}
	}
	if servers == nil {
		return
	}
	switch servers.Kind {
	case yaml.SequenceNode:
		for j, e := range servers.Content {
			servers.Content[j] = z.server(e, fmt.Sprintf("tools.mcp_servers[%d]", j), fmt.Sprintf("%s[%d]", wservers, j))
		}
	case yaml.MappingNode:
		// The READMEs' shape: server name → settings. It becomes the list,
		// in the order written.
		list := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq", Line: servers.Line, Column: servers.Column}
		for j := 0; j+1 < len(servers.Content); j += 2 {
			name, settings := servers.Content[j], servers.Content[j+1]
			p := fmt.Sprintf("tools.mcp_servers[%d]", j/2)
			wp := wservers + "." + name.Value
			if settings.Kind != yaml.MappingNode {
				z.fail(settings.Line, wp, "expected a mapping of the server's settings (command, args, env or url, headers)")
				continue
			}
			e := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: name.Line, Column: name.Column}
			e.Content = append(e.Content,
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: "name", Line: name.Line, Column: name.Column},
				&yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: name.Value, Line: name.Line, Column: name.Column})
			e.Content = append(e.Content, settings.Content...)
			z.typeToTransport(e, wp)
			z.written[p] = wp
			z.written[p+".name"] = wp
			z.rename(e, p, wp, mcpAliases)
			list.Content = append(list.Content, e)
		}
		*servers = *list
	}
}

// server rewrites one list entry of MCP servers: PenguinHarness's {name,
// config: {…}} is flattened into Penguin's one mapping.
func (z *speller) server(e *yaml.Node, path, wpath string) *yaml.Node {
	if e.Kind != yaml.MappingNode {
		return e
	}
	z.written[path] = wpath
	var config *yaml.Node
	configLine := 0
	for i := 0; i+1 < len(e.Content); i += 2 {
		if k := e.Content[i]; k.Value == "config" {
			config, configLine = e.Content[i+1], k.Line
		}
	}
	if config == nil {
		z.rename(e, path, wpath, mcpAliases)
		return e
	}
	// Under mcp_servers the nesting breaks the file's spelling; the entry
	// is flattened all the same, so that only that is reported.
	z.mark(referenceSpelling, wpath+".config", "the server's settings in the entry itself", configLine)
	if config.Kind != yaml.MappingNode {
		z.fail(config.Line, wpath+".config", "expected a mapping of the server's settings (transport, command, args, env, cwd or url, headers)")
		return e
	}
	flat := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map", Line: e.Line, Column: e.Column}
	for i := 0; i+1 < len(e.Content); i += 2 {
		switch k := e.Content[i]; k.Value {
		case "config":
		case "name":
			flat.Content = append(flat.Content, k, e.Content[i+1])
			z.written[path+".name"] = wpath + ".name"
		default:
			z.fail(k.Line, wpath, "unknown key %q: an mcpServers entry is {name, config}, with every setting under config", k.Value)
		}
	}
	flat.Content = append(flat.Content, config.Content...)
	z.rename(flat, path, wpath+".config", mcpAliases)
	// Errors about the entry as a whole concern its settings.
	z.written[path] = wpath + ".config"
	return flat
}

// typeToTransport reads the "type" key of the READMEs' shape as the
// transport; "streamable-http" is their name for http.
func (z *speller) typeToTransport(e *yaml.Node, wpath string) {
	ti, hasTransport := -1, false
	for i := 0; i+1 < len(e.Content); i += 2 {
		switch e.Content[i].Value {
		case "type":
			ti = i
		case "transport":
			hasTransport = true
		}
	}
	if ti < 0 {
		return
	}
	k, v := e.Content[ti], e.Content[ti+1]
	if hasTransport {
		z.fail(k.Line, wpath+".type", "type and transport name the same thing: write one")
		e.Content = append(e.Content[:ti], e.Content[ti+2:]...)
		return
	}
	k.Value = "transport"
	if v.Kind == yaml.ScalarNode && v.Value == "streamable-http" {
		v.Value = "http"
	}
}

// knownKeys reports every key of n that the type t does not have, as
// yaml.v3's KnownFields would: at the key's line, under its parent's
// path. Types that read YAML themselves (JSONSchema) and maps take any
// key.
func knownKeys(n *yaml.Node, t reflect.Type, path string) []error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil
	}
	var errs []error
	switch {
	case t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			f, ok := fields[k.Value]
			if !ok {
				errs = append(errs, &ConfigError{Line: k.Line, Field: path, Msg: fmt.Sprintf("unknown key %q", k.Value)})
				continue
			}
			p := k.Value
			if path != "" {
				p = path + "." + k.Value
			}
			errs = append(errs, knownKeys(n.Content[i+1], f, p)...)
		}
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		for i, e := range n.Content {
			errs = append(errs, knownKeys(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i))...)
		}
	}
	return errs
}

// yamlFields maps the yaml keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// asWritten renames the key paths of errs from the rewritten document to
// the file as written: the longest rewritten path that the error's path
// starts with is replaced by its written form.
func asWritten(err error, written map[string]string) error {
	if err == nil || len(written) == 0 {
		return err
	}
	paths := make([]string, 0, len(written))
	for p := range written {
		paths = append(paths, p)
	}
	// Longest first, so tools.mcp_servers[1].url wins over
	// tools.mcp_servers[1].
	sort.Slice(paths, func(i, j int) bool { return len(paths[i]) > len(paths[j]) })
	list := flatten(err)
	for _, e := range list {
		var ce *ConfigError
		if !errors.As(e, &ce) || ce.Field == "" {
			continue
		}
		for _, p := range paths {
			if rest, ok := strings.CutPrefix(ce.Field, p); ok && (rest == "" || rest[0] == '.' || rest[0] == '[') {
				ce.Field = written[p] + rest
				break
			}
		}
	}
	return err
}
