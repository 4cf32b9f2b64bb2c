package translate

import (
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/stream"
)

// deepestFirst lists the thinking levels from the deepest down, for the
// "max" fallback.
var deepestFirst = []penguinv1.ThinkingLevel{
	penguinv1.ThinkingLevel_THINKING_LEVEL_MAX,
	penguinv1.ThinkingLevel_THINKING_LEVEL_XHIGH,
	penguinv1.ThinkingLevel_THINKING_LEVEL_HIGH,
	penguinv1.ThinkingLevel_THINKING_LEVEL_MEDIUM,
	penguinv1.ThinkingLevel_THINKING_LEVEL_LOW,
}

// LevelName returns the reference's name of a level ("none", "low", …).
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

// Thinking resolves the request's thinking level to the adapter's wire
// value, before any provider I/O. The model's own list (from the providers
// configuration) wins over the adapter's defaults. "max" never fails: it
// lands on the deepest level the model takes, or on no thinking for a model
// that does not think. Any other level the model does not take is a
// permanent UNSUPPORTED failure. An empty wire value means "send nothing".
func Thinking(req *stream.Request, defaults stream.ThinkingLevels) (string, *failure.Error) {
	level := req.Thinking
	if level == penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		return "", nil
	}
	levels := req.Spec.Thinking
	if levels == nil {
		levels = defaults
	}
	if wire, ok := levels[level]; ok {
		return wire, nil
	}
	if level == penguinv1.ThinkingLevel_THINKING_LEVEL_MAX {
		for _, l := range deepestFirst {
			if wire, ok := levels[l]; ok {
				return wire, nil
			}
		}
		return "", nil
	}
	if level == penguinv1.ThinkingLevel_THINKING_LEVEL_NONE && len(levels) == 0 {
		// A model that does not think is already at "none".
		return "", nil
	}
	var takes []string
	for l := penguinv1.ThinkingLevel_THINKING_LEVEL_NONE; l <= penguinv1.ThinkingLevel_THINKING_LEVEL_MAX; l++ {
		if _, ok := levels[l]; ok {
			takes = append(takes, LevelName(l))
		}
	}
	if len(takes) == 0 {
		return "", failure.Unsupported("model %q of provider %q does not think, so it cannot take thinking level %q",
			req.Model, req.Provider, LevelName(level))
	}
	return "", failure.Unsupported("model %q of provider %q cannot take thinking level %q; it takes %s",
		req.Model, req.Provider, LevelName(level), strings.Join(takes, ", "))
}
