package agentconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"gopkg.in/yaml.v3"
)

// ConfigError is one problem in an agent state file. It names the file and,
// when known, the line and the key path, so a person can go straight to the
// spot: "/a/system_config.yaml:12: compaction.mode: must be summarize or
// discard".
type ConfigError struct {
	// File is the path of the file; empty for a Config validated in memory.
	File string
	// Line is the 1-based line of the problem; zero when unknown.
	Line int
	// Field is the dotted key path, such as "tools.builtin[2].name"; empty
	// when the problem is not tied to one key.
	Field string
	// Msg says what is wrong.
	Msg string
}

// Error formats the problem as file:line: field: message, leaving out the
// parts that are unknown.
func (e *ConfigError) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		if e.Line > 0 {
			fmt.Fprintf(&b, ":%d", e.Line)
		}
		b.WriteString(": ")
	} else if e.Line > 0 {
		fmt.Fprintf(&b, "line %d: ", e.Line)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// JSONSchema is a JSON Schema held as JSON text. In YAML it may be written
// as a mapping (the natural form in a hand-edited file) or as a string of
// JSON; either way it is kept as JSON text with its key order preserved,
// because the order of properties is what the model reads.
type JSONSchema string

// MarshalYAML writes the schema as a YAML mapping with the key order of
// the JSON text.
func (s JSONSchema) MarshalYAML() (any, error) {
	if s == "" {
		return nil, nil
	}
	n, err := jsonToNode([]byte(s))
	if err != nil {
		return nil, fmt.Errorf("parameters: %w", err)
	}
	return n, nil
}

// UnmarshalYAML accepts a mapping or a JSON string, and requires a JSON
// object either way.
func (s *JSONSchema) UnmarshalYAML(n *yaml.Node) error {
	var text []byte
	switch n.Kind {
	case yaml.MappingNode:
		var b bytes.Buffer
		if err := nodeToJSON(&b, n); err != nil {
			return typeError(n, err.Error())
		}
		text = b.Bytes()
	case yaml.ScalarNode:
		if n.ShortTag() == "!!null" {
			*s = ""
			return nil
		}
		raw := strings.TrimSpace(n.Value)
		if !json.Valid([]byte(raw)) {
			return typeError(n, "parameters must be a JSON Schema object, written as a mapping or as a JSON string")
		}
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(raw)); err != nil {
			return typeError(n, err.Error())
		}
		text = b.Bytes()
	default:
		return typeError(n, "parameters must be a JSON Schema object, written as a mapping or as a JSON string")
	}
	if len(text) == 0 || text[0] != '{' {
		return typeError(n, "parameters must be a JSON object")
	}
	*s = JSONSchema(text)
	return nil
}

// typeError reports a problem at a node in the form yaml.v3 collects, so it
// is listed with the decoder's own errors.
func typeError(n *yaml.Node, msg string) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s", n.Line, msg)}}
}

// nodeToJSON writes a YAML node as compact JSON, keeping mapping key order.
func nodeToJSON(w *bytes.Buffer, n *yaml.Node) error {
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			w.WriteString("null")
			return nil
		}
		return nodeToJSON(w, n.Content[0])
	case yaml.AliasNode:
		return nodeToJSON(w, n.Alias)
	case yaml.MappingNode:
		w.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind != yaml.ScalarNode {
				return fmt.Errorf("line %d: a JSON object key must be a string", k.Line)
			}
			if i > 0 {
				w.WriteByte(',')
			}
			kb, _ := json.Marshal(k.Value)
			w.Write(kb)
			w.WriteByte(':')
			if err := nodeToJSON(w, n.Content[i+1]); err != nil {
				return err
			}
		}
		w.WriteByte('}')
	case yaml.SequenceNode:
		w.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				w.WriteByte(',')
			}
			if err := nodeToJSON(w, c); err != nil {
				return err
			}
		}
		w.WriteByte(']')
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!null":
			w.WriteString("null")
		case "!!bool":
			var v bool
			if err := n.Decode(&v); err != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
			w.WriteString(strconv.FormatBool(v))
		case "!!int", "!!float":
			var v any
			if err := n.Decode(&v); err != nil {
				return fmt.Errorf("line %d: %w", n.Line, err)
			}
			b, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("line %d: %v is not a JSON number", n.Line, n.Value)
			}
			w.Write(b)
		default:
			b, _ := json.Marshal(n.Value)
			w.Write(b)
		}
	}
	return nil
}

// jsonToNode parses JSON text into a YAML node, keeping object key order.
func jsonToNode(text []byte) (*yaml.Node, error) {
	dec := json.NewDecoder(bytes.NewReader(text))
	dec.UseNumber()
	n, err := jsonValueNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("trailing data after the JSON value")
	}
	return n, nil
}

func jsonValueNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				key, _ := kt.(string)
				v, err := jsonValueNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: key}, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		case '[':
			n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
			for dec.More() {
				v, err := jsonValueNode(dec)
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
		return nil, fmt.Errorf("unexpected %v", t)
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t}, nil
	case json.Number:
		tag := "!!int"
		if strings.ContainsAny(t.String(), ".eE") {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", tok)
}

var (
	lineMsgRe      = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`) })
	unknownFieldRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^field (\S+) not found in type \S+$`) })
	cannotDecodeRe = sync.OnceValue(func() *regexp.Regexp {
		return regexp.MustCompile("^cannot unmarshal !!(\\w+)(?: `(.*)`)? into (\\S+)$")
	})
	alreadySetRe    = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^field (\S+) already set in type \S+$`) })
	mappingKeyDupRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^mapping key "(.*)" already defined at line (\d+)$`) })
)

// YAMLErrors turns a yaml.v3 error into ConfigErrors for file, rewording
// the decoder's Go-flavoured messages (type names, "field not found") into
// what a person editing the file needs. lineOffset is added to every line,
// for YAML embedded in a larger file such as a SKILL.md front matter.
func YAMLErrors(file string, err error, lineOffset int) error {
	var te *yaml.TypeError
	var msgs []string
	if errors.As(err, &te) {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	errs := make([]error, 0, len(msgs))
	for _, m := range msgs {
		ce := &ConfigError{File: file, Msg: strings.TrimPrefix(m, "yaml: ")}
		if sm := lineMsgRe().FindStringSubmatch(m); sm != nil {
			ce.Line, _ = strconv.Atoi(sm[1])
			ce.Line += lineOffset
			ce.Msg = rewordYAML(sm[2], lineOffset)
		}
		errs = append(errs, ce)
	}
	return errors.Join(errs...)
}

func rewordYAML(msg string, lineOffset int) string {
	if sm := unknownFieldRe().FindStringSubmatch(msg); sm != nil {
		return fmt.Sprintf("unknown key %q", sm[1])
	}
	if sm := alreadySetRe().FindStringSubmatch(msg); sm != nil {
		return fmt.Sprintf("key %q appears twice", sm[1])
	}
	if sm := mappingKeyDupRe().FindStringSubmatch(msg); sm != nil {
		l, _ := strconv.Atoi(sm[2])
		return fmt.Sprintf("key %q appears twice (first at line %d)", sm[1], l+lineOffset)
	}
	if sm := cannotDecodeRe().FindStringSubmatch(msg); sm != nil {
		if sm[1] == "seq" || sm[1] == "map" {
			return fmt.Sprintf("expected %s, got %s", goTypeWords(sm[3]), yamlTagWords(sm[1]))
		}
		return fmt.Sprintf("expected %s, got %s %q", goTypeWords(sm[3]), yamlTagWords(sm[1]), sm[2])
	}
	return msg
}

func goTypeWords(t string) string {
	switch {
	case t == "time.Duration":
		return `a duration with a unit, such as "2s" or "500ms"`
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "map["), strings.Contains(t, "."):
		return "a mapping"
	case strings.HasPrefix(t, "int"), strings.HasPrefix(t, "uint"):
		return "an integer"
	case strings.HasPrefix(t, "float"):
		return "a number"
	case t == "bool":
		return "true or false"
	case t == "string":
		return "a string"
	}
	return t
}

func yamlTagWords(tag string) string {
	switch tag {
	case "str":
		return "the string"
	case "int":
		return "the integer"
	case "float":
		return "the number"
	case "bool":
		return "the boolean"
	case "map":
		return "a mapping"
	case "seq":
		return "a list"
	}
	return tag
}

var pathSegRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`([^.\[\]]+)|\[(\d+)\]`) })

// lineOf finds the line of the value at a key path such as
// "tools.builtin[2].name" in a parsed document, or of the deepest part of
// the path that exists; zero when the document is empty.
func lineOf(root *yaml.Node, path string) int {
	n := root
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return 0
		}
		n = n.Content[0]
	}
	line := n.Line
	for _, m := range pathSegRe().FindAllStringSubmatch(path, -1) {
		var next *yaml.Node
		if m[1] != "" && n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == m[1] {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		} else if m[2] != "" && n.Kind == yaml.SequenceNode {
			idx, _ := strconv.Atoi(m[2])
			if idx < len(n.Content) {
				next = n.Content[idx]
				line = next.Line
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}

// fieldAt finds the key path of the deepest key written on a line, such as
// "retry.base_delay", so that a decoder error, which knows only the line,
// can name the key too. It returns "" when no key starts on that line.
func fieldAt(root *yaml.Node, line int) string {
	best, bestDepth := "", -1
	var walk func(n *yaml.Node, path string, depth int)
	walk = func(n *yaml.Node, path string, depth int) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path, depth)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if k.Line == line && depth > bestDepth {
					best, bestDepth = p, depth
				}
				walk(n.Content[i+1], p, depth+1)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i), depth+1)
			}
		}
	}
	if root != nil {
		walk(root, "", 0)
	}
	return best
}

// nameFields fills in the key path of decoder errors from the document.
// An unknown key is reported at its parent, since the key itself is what
// the message quotes.
func nameFields(err error, root *yaml.Node) error {
	list := flatten(err)
	for _, e := range list {
		var ce *ConfigError
		if !errors.As(e, &ce) || ce.Field != "" || ce.Line == 0 {
			continue
		}
		f := fieldAt(root, ce.Line)
		if strings.HasPrefix(ce.Msg, "unknown key ") || strings.HasPrefix(ce.Msg, "key ") {
			if i := strings.LastIndexAny(f, ".["); i >= 0 {
				f = f[:i]
			} else {
				f = ""
			}
		}
		ce.Field = f
	}
	return err
}

// flatten lists the errors joined in err, however deeply joins nest; nil
// lists none.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}
