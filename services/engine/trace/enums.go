package trace

import (
	"fmt"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// enumNames pairs each defined value of an enum with the reference's
// string for it. The unspecified value has no string: it is either omitted
// (an optional field) or an error (a required one).
type enumNames[E ~int32] struct {
	what  string
	names map[E]string
}

// name returns the reference's string for v, or "" for the unspecified
// value.
func (e enumNames[E]) name(v E) (string, error) {
	if v == 0 {
		return "", nil
	}
	s, ok := e.names[v]
	if !ok {
		return "", fmt.Errorf("%s %d has no name in the trace format", e.what, v)
	}
	return s, nil
}

// required is name for a field the reference always carries.
func (e enumNames[E]) required(v E) (string, error) {
	if v == 0 {
		return "", fmt.Errorf("%s is not set", e.what)
	}
	return e.name(v)
}

// value parses the reference's string; "" is the unspecified value.
func (e enumNames[E]) value(s string) (E, error) {
	if s == "" {
		return 0, nil
	}
	for v, n := range e.names {
		if n == s {
			return v, nil
		}
	}
	return 0, fmt.Errorf("unknown %s %q", e.what, s)
}

// requiredValue is value for a field the reference always carries.
func (e enumNames[E]) requiredValue(s string) (E, error) {
	if s == "" {
		return 0, fmt.Errorf("%s is missing", e.what)
	}
	return e.value(s)
}

// The reference's enum strings (omni-message.md).
func roles() enumNames[penguinv1.Role] {
	return enumNames[penguinv1.Role]{what: "role", names: map[penguinv1.Role]string{
		penguinv1.Role_ROLE_USER:      "user",
		penguinv1.Role_ROLE_ASSISTANT: "assistant",
	}}
}

func senders() enumNames[penguinv1.Sender] {
	return enumNames[penguinv1.Sender]{what: "sender", names: map[penguinv1.Sender]string{
		penguinv1.Sender_SENDER_USER:         "user",
		penguinv1.Sender_SENDER_PARENT_AGENT: "parent_agent",
		penguinv1.Sender_SENDER_HARNESS:      "harness",
		penguinv1.Sender_SENDER_SERVER:       "server",
	}}
}

func stopReasons(what string) enumNames[penguinv1.StopReason] {
	return enumNames[penguinv1.StopReason]{what: what, names: map[penguinv1.StopReason]string{
		penguinv1.StopReason_STOP_REASON_COMPLETED: "completed",
		penguinv1.StopReason_STOP_REASON_FAILED:    "failed",
		penguinv1.StopReason_STOP_REASON_ABORTED:   "aborted",
		penguinv1.StopReason_STOP_REASON_TIMEOUT:   "timeout",
		penguinv1.StopReason_STOP_REASON_MALFORMED: "malformed",
		penguinv1.StopReason_STOP_REASON_AUTH:      "auth",
	}}
}

func eventTypes() enumNames[penguinv1.StreamEventType] {
	return enumNames[penguinv1.StreamEventType]{what: "event_type", names: map[penguinv1.StreamEventType]string{
		penguinv1.StreamEventType_STREAM_EVENT_TYPE_START: "start",
		penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA: "delta",
		penguinv1.StreamEventType_STREAM_EVENT_TYPE_STOP:  "stop",
	}}
}

func decisions() enumNames[penguinv1.Decision] {
	return enumNames[penguinv1.Decision]{what: "decision", names: map[penguinv1.Decision]string{
		penguinv1.Decision_DECISION_ALLOW:     "allow",
		penguinv1.Decision_DECISION_DENY:      "deny",
		penguinv1.Decision_DECISION_FORBIDDEN: "forbidden",
	}}
}

func compactionReasons() enumNames[penguinv1.CompactionReason] {
	return enumNames[penguinv1.CompactionReason]{what: "compaction reason", names: map[penguinv1.CompactionReason]string{
		penguinv1.CompactionReason_COMPACTION_REASON_CONTEXT: "context",
		penguinv1.CompactionReason_COMPACTION_REASON_TURNS:   "turns",
		penguinv1.CompactionReason_COMPACTION_REASON_MANUAL:  "manual",
	}}
}

func compactionModes() enumNames[penguinv1.CompactionMode] {
	return enumNames[penguinv1.CompactionMode]{what: "compaction mode", names: map[penguinv1.CompactionMode]string{
		penguinv1.CompactionMode_COMPACTION_MODE_SUMMARIZE: "summarize",
		penguinv1.CompactionMode_COMPACTION_MODE_DISCARD:   "discard",
	}}
}

func mcpStatuses() enumNames[penguinv1.McpConnectStatus] {
	return enumNames[penguinv1.McpConnectStatus]{what: "mcp connect status", names: map[penguinv1.McpConnectStatus]string{
		penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_COMPLETED: "completed",
		penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_FAILED:    "failed",
		penguinv1.McpConnectStatus_MCP_CONNECT_STATUS_ABORTED:   "aborted",
	}}
}
