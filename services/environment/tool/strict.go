package tool

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"unicode"
)

// Params is what a tool's parameter schema says about the argument names
// it takes, for the strict check every call passes before its command
// policy is evaluated and before the tool runs.
//
// Go's encoding/json matches object keys to struct fields without regard
// to case and keeps the last of duplicates, while a map (what the command
// policy reads) keeps each spelling apart. So {"cmd":"echo","Cmd":"rm -rf
// x"} would show the policy one command and run another. Check closes that
// gap once for every tool, builtin, custom or MCP: no key may appear twice,
// no two keys of one object may differ only in case (at any depth), no
// key may be a case variant of a parameter, and, when the schema lists its
// properties and does not allow others, no key may be unknown.
type Params struct {
	names  map[string]bool   // the declared properties
	folded map[string]string // folded spelling -> declared property
	open   bool              // keys beyond the properties are allowed
}

// ParseParams reads the top-level properties of a JSON Schema. A schema
// without "properties", or with "additionalProperties" set to anything
// but false, is open: unknown keys pass (case variants still do not). A
// schema that cannot be read is open too; creating the tool checked it is
// JSON.
//
// Every environment parses the schemas of all its tools, and the builtin
// ones are the same each time, so results are kept per schema text (see
// parsedParams): a Params is never changed once made, so environments can
// share one.
func ParseParams(schema string) Params {
	if p, ok := parsedParams.get(schema); ok {
		return p
	}
	p := parseParams(schema)
	parsedParams.put(schema, p)
	return p
}

// parsedParams holds the Params of up to maxParsedParams schema texts:
// the builtin tools' and the first custom and MCP tools'. Past that,
// schemas are parsed each time, so tools made up per environment cannot
// grow it without bound.
var parsedParams = &paramsCache{m: map[string]Params{}}

const maxParsedParams = 256

type paramsCache struct {
	mu sync.Mutex
	m  map[string]Params
}

func (c *paramsCache) get(schema string) (Params, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p, ok := c.m[schema]
	return p, ok
}

func (c *paramsCache) put(schema string, p Params) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) < maxParsedParams {
		c.m[schema] = p
	}
}

func parseParams(schema string) Params {
	p := Params{names: map[string]bool{}, folded: map[string]string{}}
	var s struct {
		Properties           map[string]json.RawMessage `json:"properties"`
		AdditionalProperties json.RawMessage            `json:"additionalProperties"`
	}
	if err := json.Unmarshal([]byte(schema), &s); err != nil || s.Properties == nil {
		p.open = true
		return p
	}
	extra := strings.TrimSpace(string(s.AdditionalProperties))
	p.open = extra != "" && extra != "false"
	for name := range s.Properties {
		p.names[name] = true
		p.folded[fold(name)] = name
	}
	return p
}

// fold is the case folding encoding/json applies when it matches a key to
// a field, so that every spelling it would take for a name is caught.
func fold(s string) string {
	return strings.Map(func(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }, s)
}

// Check refuses arguments whose keys the policy and the tool could read
// differently. Arguments that are not a JSON object pass: the tool's own
// decoding refuses them with a better message.
func (p Params) Check(args string) error {
	dec := json.NewDecoder(strings.NewReader(args))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil || tok != json.Delim('{') {
		return nil
	}
	err = p.object(dec, "", true)
	if err == errSyntax {
		return nil
	}
	return err
}

// errSyntax ends a check on malformed JSON, which the tool reports.
var errSyntax = fmt.Errorf("malformed JSON")

// object checks the keys of an object whose "{" was just read; at is its
// path from the top ("" for the top level).
func (p Params) object(dec *json.Decoder, at string, top bool) error {
	seen := map[string]string{} // folded -> spelling
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return errSyntax
		}
		key, _ := tok.(string)
		if prev, dup := seen[fold(key)]; dup {
			where := "the arguments give"
			if !top {
				where = fmt.Sprintf("argument %q gives", at)
			}
			if prev == key {
				return fmt.Errorf("%s the key %q twice; give each key once", where, key)
			}
			return fmt.Errorf("%s both %q and %q, which differ only in case; names are case-sensitive, give one", where, prev, key)
		}
		seen[fold(key)] = key
		if top && !p.names[key] {
			if want, ok := p.folded[fold(key)]; ok {
				return fmt.Errorf("unknown argument %q: argument names are case-sensitive, the parameter is %q", key, want)
			}
			if !p.open {
				return fmt.Errorf("unknown argument %q: the parameters are %s", key, p.list())
			}
		}
		path := key
		if !top {
			path = at + "." + key
		}
		if err := p.value(dec, path); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing "}"
		return errSyntax
	}
	return nil
}

// value checks one value, descending into objects and arrays.
func (p Params) value(dec *json.Decoder, at string) error {
	tok, err := dec.Token()
	if err != nil {
		return errSyntax
	}
	switch tok {
	case json.Delim('{'):
		return p.object(dec, at, false)
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if err := p.value(dec, fmt.Sprintf("%s[%d]", at, i)); err != nil {
				return err
			}
		}
		if _, err := dec.Token(); err != nil {
			return errSyntax
		}
	}
	return nil
}

// list names the declared parameters, quoted and sorted.
func (p Params) list() string {
	if len(p.names) == 0 {
		return "none"
	}
	names := make([]string, 0, len(p.names))
	for n := range p.names {
		names = append(names, fmt.Sprintf("%q", n))
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
