package tool

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// DecodeArgs decodes a call's raw arguments JSON into dst (a pointer to a
// struct with json tags) and checks that every name in required is present.
// Empty arguments count as an empty object. The errors are written for the
// model: they say which argument is wrong and how.
func DecodeArgs(args string, dst any, required ...string) error {
	raw := strings.TrimSpace(args)
	if raw == "" {
		raw = "{}"
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &fields); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			return fmt.Errorf("the arguments are not valid JSON (at byte %d: %v)", syn.Offset, syn)
		}
		return fmt.Errorf("the arguments must be a JSON object: %v", err)
	}
	if fields == nil {
		return errors.New("the arguments must be a JSON object, not null")
	}
	var missing []string
	for _, name := range required {
		v, ok := fields[name]
		if !ok || bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			missing = append(missing, fmt.Sprintf("%q", name))
		}
	}
	if len(missing) == 1 {
		return fmt.Errorf("missing required argument %s", missing[0])
	}
	if len(missing) > 1 {
		return fmt.Errorf("missing required arguments %s", strings.Join(missing, ", "))
	}
	if err := json.Unmarshal([]byte(raw), dst); err != nil {
		var typ *json.UnmarshalTypeError
		if errors.As(err, &typ) && typ.Field != "" {
			return fmt.Errorf("argument %q must be a JSON %s, not %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
		}
		return fmt.Errorf("the arguments do not fit the tool's schema: %v", err)
	}
	return nil
}

// jsonKind names a Go kind the way JSON Schema would.
func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "bool":
		return "boolean"
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "float32", "float64":
		return "number"
	case "slice", "array":
		return "array"
	default:
		return "object"
	}
}
