package translate

import (
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// LevelName returns the configuration's name of a level ("none", "low", …),
// as agent configurations and the CLI spell it.
func LevelName(l penguinv1.ThinkingLevel) string {
	return strings.ToLower(strings.TrimPrefix(l.String(), "THINKING_LEVEL_"))
}

// ParseLevel returns the level named name ("none" … "max").
func ParseLevel(name string) (penguinv1.ThinkingLevel, bool) {
	v, ok := penguinv1.ThinkingLevel_value["THINKING_LEVEL_"+strings.ToUpper(strings.TrimSpace(name))]
	if !ok || v == 0 {
		return 0, false
	}
	return penguinv1.ThinkingLevel(v), true
}

// Thinking resolves the request's thinking level to the wire value the
// adapter sends, before any provider I/O; empty means "send no reasoning
// parameter". It never fails: a model that does not reason (or whose
// reasoning cannot be controlled, or that nobody describes) sends nothing
// whatever the level, since its answer is just as valid; a level the model
// does not list lands on the deepest listed level below it, else the
// shallowest above it, so that "max" lands on the deepest level a model
// has and no level fails. The catalog lists every level of every model it can
// control, so this fallback serves partial lists in a providers file.
func Thinking(req *stream.Request) string {
	level := req.Thinking
	levels := req.Spec.Thinking
	if level == penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED || len(levels) == 0 {
		return ""
	}
	if wire, ok := levels[level]; ok {
		return wire
	}
	for l := level - 1; l >= penguinv1.ThinkingLevel_THINKING_LEVEL_NONE; l-- {
		if wire, ok := levels[l]; ok {
			return wire
		}
	}
	for l := level + 1; l <= penguinv1.ThinkingLevel_THINKING_LEVEL_MAX; l++ {
		if wire, ok := levels[l]; ok {
			return wire
		}
	}
	return ""
}
