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
// extra (what the sandbox sets, such as TMPDIR and the proxy), then the
// forced variables. It returns the whole of it, in which the login shell
// of the shell snapshot starts, and the part that a login profile cannot
// override: the vault, extra and the forced variables.
//
// The entries taken from base are base's own strings, not copies: every
// environment keeps its env for as long as it lives (the environment idle
// timeout after its session's last task), and with a usual environment of
// a few KiB, a copy of it each was the largest part of an idle
// environment's memory.
func CommandEnv(base []string, vault, extra map[string]string) (env, fixed []string) {
	pairs := map[string]string{} // name: its "NAME=value" entry
	for _, kv := range base {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || strings.HasPrefix(k, "PENGUIN_") || removedEnv[k] {
			continue
		}
		pairs[k] = kv
	}
	over := map[string]string{}
	for _, layer := range []map[string]string{vault, extra, forcedEnv} {
		for k, v := range layer {
			over[k] = v
		}
	}
	for k, v := range over {
		pairs[k] = k + "=" + v
	}
	env = make([]string, 0, len(pairs))
	for _, kv := range pairs {
		env = append(env, kv)
	}
	sort.Strings(env)
	return env, sortedPairs(over)
}

// sortedPairs spells vars as sorted "NAME=value" entries.
func sortedPairs(vars map[string]string) []string {
	out := make([]string, 0, len(vars))
	for k, v := range vars {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
