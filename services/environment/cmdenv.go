package environment

import (
	"sort"
	"strings"
)

// forcedEnv are set for every command so that nothing waits on an editor, a
// credential prompt or a pager, and output stays plain text. The vault
// cannot override them.
var forcedEnv = map[string]string{
	"TERM":                "dumb",
	"NO_COLOR":            "1",
	"PAGER":               "cat",
	"GIT_PAGER":           "cat",
	"GIT_EDITOR":          "true",
	"GIT_TERMINAL_PROMPT": "0",
}

// removedEnv configure penguin itself or hold provider credentials, which
// stay with the llm service; commands do not inherit them (the vault can
// still set them).
var removedEnv = map[string]bool{
	"PORT": true, "HOST": true,
	"OPENAI_API_KEY": true, "ANTHROPIC_API_KEY": true, "DEEPSEEK_API_KEY": true, "MINIMAX_API_KEY": true,
	"GEMINI_API_KEY": true, "ZAI_API_KEY": true, "MOONSHOT_API_KEY": true,
}

// CommandEnv builds the environment of commands: base without penguin's
// own variables (PENGUIN_*) and provider credentials, then the vault, then
// the forced variables.
func CommandEnv(base []string, vault map[string]string) []string {
	vars := map[string]string{}
	for _, kv := range base {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || strings.HasPrefix(k, "PENGUIN_") || removedEnv[k] {
			continue
		}
		vars[k] = v
	}
	for k, v := range vault {
		if _, forced := forcedEnv[k]; !forced {
			vars[k] = v
		}
	}
	for k, v := range forcedEnv {
		vars[k] = v
	}
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
