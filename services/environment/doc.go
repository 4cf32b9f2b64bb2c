// Package environment is the environment service: it hosts sandboxed
// workspaces, each with its tools (builtin, custom and MCP), its command
// sessions and its MCP connections, and runs tool calls inside one framing
// layer that keeps the streaming discipline ("loose tools, tight
// framework"). A tool's failure reaches the caller as a tool_call_output
// with a stop_reason, never as an RPC error.
//
// The parts live in subpackages: framing (the stream shape, timeouts,
// truncation, redaction, the archives of truncated output), builtin (the
// builtin tools), command (commands in pseudo-terminals, or on pipes for
// bulk output), custom and mcp (configured tools), tool (the tool contract
// and the strict check of arguments), workspace (every file operation,
// beneath a directory handle), ignore (.gitignore-aware walking), egress
// (URL fetches that keep to public addresses), redact (vault values,
// encoded forms included) and sandbox (confinement and process tracking).
// The command deny rules are internal/cmdpolicy, shared with the engine.
// docs/security.md says what each defence stops and leaves open.
package environment
