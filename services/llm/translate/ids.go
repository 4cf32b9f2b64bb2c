package translate

import (
	"strconv"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// IDs keeps tool-call ids unique within a session without the service
// keeping any state: the set of ids in use is derived from the history each
// request carries. Some providers reuse ids across turns or use the
// function name as the id; such an id gets "#n" appended inbound (the
// smallest n ≥ 2 not yet taken) and the suffix is stripped outbound, so the
// provider sees its own id again.
type IDs struct {
	used map[string]bool
	next int
}

// NewIDs returns the allocator for a request whose messages are msgs: every
// tool_call id in them is taken.
func NewIDs(msgs []*penguinv1.OmniMessage) *IDs {
	ids := &IDs{used: map[string]bool{}}
	for _, m := range msgs {
		if tc := m.GetToolCall(); tc != nil {
			ids.used[tc.GetToolCallId()] = true
		}
	}
	return ids
}

// Inbound returns the session-unique id for a call the provider named
// providerID. A provider that sends no id at all gets the function name (or
// "call") as the base, which the same rule then makes unique.
func (ids *IDs) Inbound(providerID, name string) string {
	base := providerID
	if base == "" {
		base = name
	}
	if base == "" {
		base = "call"
	}
	id := base
	for n := 2; ids.used[id]; n++ {
		id = base + "#" + strconv.Itoa(n)
	}
	ids.used[id] = true
	return id
}

// Outbound returns the id to send to the provider for a session id: the
// "#n" suffix that Inbound added is stripped. A suffix is only taken for
// Inbound's when the bare id is itself in use in this request's messages,
// so a provider's own id that happens to end in "#2" goes back unchanged.
func (ids *IDs) Outbound(id string) string {
	i := strings.LastIndexByte(id, '#')
	if i <= 0 || i == len(id)-1 {
		return id
	}
	if _, err := strconv.Atoi(id[i+1:]); err != nil {
		return id
	}
	if base := id[:i]; ids.used[base] {
		return base
	}
	return id
}
