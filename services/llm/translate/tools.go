package translate

import (
	"bytes"
	"encoding/json"

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

// Body writes the JSON of v, an object, to buf, with the array of tools'
// JSON (from e, between its open and close) as its member key when there
// are tools: v is encoded and the tools appended after its other members
// (JSON does not order them), in room grown once to their exact size. buf
// is the request's pooled body (see sse.Body), so a body allocates
// nothing once the pool's buffers have grown to the requests' size. On an
// error, buf is as it was.
func (e *ToolEncodings) Body(buf *bytes.Buffer, v any, key string, tools []*penguinv1.ToolDefinition) error {
	encs := make([][]byte, 0, len(tools))
	size := 0
	for _, t := range tools {
		enc, err := e.Get(t)
		if err != nil {
			return err
		}
		encs = append(encs, enc)
		size += len(enc) + 1
	}
	start := buf.Len()
	if err := json.NewEncoder(buf).Encode(v); err != nil {
		buf.Truncate(start)
		return err
	}
	// Encode ends the object with "}\n".
	buf.Truncate(buf.Len() - 2)
	if len(encs) == 0 {
		buf.WriteByte('}')
		return nil
	}
	buf.Grow(len(`,"":`) + len(key) + len(e.open) + size + len(e.close) + len(`}`))
	if b := buf.Bytes(); b[len(b)-1] != '{' {
		buf.WriteByte(',')
	}
	buf.WriteByte('"')
	buf.WriteString(key)
	buf.WriteString(`":`)
	buf.WriteString(e.open)
	for i, enc := range encs {
		if i > 0 {
			buf.WriteByte(',')
		}
		buf.Write(enc)
	}
	buf.WriteString(e.close)
	buf.WriteByte('}')
	return nil
}
