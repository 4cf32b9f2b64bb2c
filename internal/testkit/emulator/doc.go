// Package emulator is a fake model provider for tests and demos: an HTTP
// server that speaks the real wire formats of OpenAI Chat Completions
// (POST /v1/chat/completions) and Anthropic Messages (POST /v1/messages),
// streaming and non-streaming, and answers each request with the next turn
// of a [Script].
//
// It exists so that every test above the provider layer (the llm adapters,
// the gRPC service, the engine's agent loop, the CLI demos) runs against real
// HTTP, real SSE framing and the real client libraries instead of a mock of
// the adapter interface: a bug in how an adapter reads a chunk, a usage frame
// or an error body then shows up in those tests, as it would against the
// real provider.
//
// A turn scripts what the model says (thinking with its signature, redacted
// thinking, text, tool calls, usage), how it is paced (delta size and delay)
// and how it fails (an error status with Retry-After, a rejected key, a
// dropped connection, a malformed chunk, an in-stream error, a truncated
// stream, a stall). Every request is recorded, so a test can assert what the
// adapter sent. SCRIPT.md in this directory documents the script format.
//
// The server is safe for concurrent use: a request takes a lock only to pick
// its turn and record itself, never while streaming, so a benchmark can run
// a thousand paced streams against one server.
package emulator
