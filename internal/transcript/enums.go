package transcript

import (
	"fmt"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
)

// enumNames reads and writes one enum field of the trace format, whose
// strings are the contract's enum words (enumword). The unspecified value
// has no string: it is either omitted (an optional field) or an error (a
// required one). what names the field in errors.
type enumNames[E enumword.Enum] struct {
	what string
}

// name returns the string for v, or "" for the unspecified value.
func (e enumNames[E]) name(v E) (string, error) {
	if v == 0 {
		return "", nil
	}
	s, ok := enumword.Lookup(v)
	if !ok {
		return "", fmt.Errorf("%s %d has no name in the trace format", e.what, v)
	}
	return s, nil
}

// required is name for a field the trace format always carries.
func (e enumNames[E]) required(v E) (string, error) {
	if v == 0 {
		return "", fmt.Errorf("%s is not set", e.what)
	}
	return e.name(v)
}

// value parses a string; "" is the unspecified value.
func (e enumNames[E]) value(s string) (E, error) {
	if s == "" {
		return 0, nil
	}
	v, ok := enumword.Parse[E](s)
	if !ok {
		return 0, fmt.Errorf("unknown %s %q", e.what, s)
	}
	return v, nil
}

// requiredValue is value for a field the trace format always carries.
func (e enumNames[E]) requiredValue(s string) (E, error) {
	if s == "" {
		return 0, fmt.Errorf("%s is missing", e.what)
	}
	return e.value(s)
}

// The enum fields of the trace format.
func roles() enumNames[penguinv1.Role]     { return enumNames[penguinv1.Role]{what: "role"} }
func senders() enumNames[penguinv1.Sender] { return enumNames[penguinv1.Sender]{what: "sender"} }
func decisions() enumNames[penguinv1.Decision] {
	return enumNames[penguinv1.Decision]{what: "decision"}
}

func stopReasons(what string) enumNames[penguinv1.StopReason] {
	return enumNames[penguinv1.StopReason]{what: what}
}

func eventTypes() enumNames[penguinv1.StreamEventType] {
	return enumNames[penguinv1.StreamEventType]{what: "event_type"}
}

func compactionReasons() enumNames[penguinv1.CompactionReason] {
	return enumNames[penguinv1.CompactionReason]{what: "compaction reason"}
}

func compactionModes() enumNames[penguinv1.CompactionMode] {
	return enumNames[penguinv1.CompactionMode]{what: "compaction mode"}
}

func mcpStatuses() enumNames[penguinv1.McpConnectStatus] {
	return enumNames[penguinv1.McpConnectStatus]{what: "mcp connect status"}
}
