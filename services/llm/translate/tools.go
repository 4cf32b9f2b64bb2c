package translate

import (
	"bytes"
	"encoding/json"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/bytecache"
)

// ToolEncodings keeps the JSON of the tools an adapter sends, by
// definition, within maxToolEncodingBytes in all (when full it starts
// over). encoding/json compacts a json.RawMessage again at every Marshal
// (it scans and copies it), and the tool schemas, the same at every
// request of a session, are most of a first request's bytes: encoding
// them once took most of the CPU of building a body away.
type ToolEncodings struct {
	encode func(*penguinv1.ToolDefinition) ([]byte, error)
	kept   *bytecache.Map[toolKey, []byte]
	// open and close are written before and after the tools' JSON in a
	// body: "[" and "]", or what an API nests its array in.
	open, close string
}

// maxToolEncodingBytes bounds what a ToolEncodings holds: the tools of
// many agents and MCP servers.
const maxToolEncodingBytes = 1 << 20

// toolKey is a tool definition's fields; a map keyed by it hashes the
// strings without copying them.
type toolKey struct{ name, description, parameters string }

// NewToolEncodings returns a ToolEncodings whose tools are encoded by
// encode, in the adapter's wire format: the JSON of one element of the
// request's tools array.
func NewToolEncodings(encode func(*penguinv1.ToolDefinition) ([]byte, error)) *ToolEncodings {
	return NewNestedToolEncodings(encode, "[", "]")
}

// NewNestedToolEncodings is NewToolEncodings for an API whose body holds
// the tools' array nested in other JSON: Body writes open before the
// tools' elements and close after them (Gemini's
// [{"functionDeclarations":[ and ]}]).
func NewNestedToolEncodings(encode func(*penguinv1.ToolDefinition) ([]byte, error), open, close string) *ToolEncodings {
	return &ToolEncodings{encode: encode, kept: bytecache.New[toolKey, []byte](maxToolEncodingBytes), open: open, close: close}
}

// Get returns the JSON of t. The slice returned is shared and must not be
// changed.
func (e *ToolEncodings) Get(t *penguinv1.ToolDefinition) ([]byte, error) {
	k := toolKey{t.GetName(), t.GetDescription(), t.GetParameters()}
	if enc, ok := e.kept.Get(k); ok {
		return enc, nil
	}
	enc, err := e.encode(t)
	if err != nil {
		return nil, err
	}
	e.kept.Put(k, enc, len(enc))
	return enc, nil
}

// Body returns the JSON of v, an object, with the array of tools' JSON
// (from e, between its open and close) as its member key when there are
// tools: v is encoded into a
// pooled buffer and the tools appended after its other members (JSON does
// not order them), so the one allocation left is the body itself, at its
// final size.
func (e *ToolEncodings) Body(v any, key string, tools []*penguinv1.ToolDefinition) ([]byte, error) {
	encs := make([][]byte, 0, len(tools))
	size := 0
	for _, t := range tools {
		enc, err := e.Get(t)
		if err != nil {
			return nil, err
		}
		encs = append(encs, enc)
		size += len(enc) + 1
	}
	scratch := scratchPool.Get().(*bytes.Buffer)
	defer putScratch(scratch)
	scratch.Reset()
	if err := json.NewEncoder(scratch).Encode(v); err != nil {
		return nil, err
	}
	// Encode ends the object with "}\n".
	head := bytes.TrimSuffix(scratch.Bytes(), []byte("}\n"))
	out := append(make([]byte, 0, len(head)+len(key)+len(`,"":}`)+len(e.open)+len(e.close)+size), head...)
	if len(encs) == 0 {
		return append(out, '}'), nil
	}
	if out[len(out)-1] != '{' {
		out = append(out, ',')
	}
	out = append(append(append(append(out, '"'), key...), `":`...), e.open...)
	for i, enc := range encs {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, enc...)
	}
	return append(append(out, e.close...), '}'), nil
}

// scratchPool holds the buffers bodies are encoded into before their
// tools are appended.
var scratchPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// maxScratch is the largest buffer put back in scratchPool: a session's
// long history must not stay pinned by the pool.
const maxScratch = 256 << 10

func putScratch(b *bytes.Buffer) {
	if b.Cap() <= maxScratch {
		scratchPool.Put(b)
	}
}
