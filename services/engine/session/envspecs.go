package session

import (
	"crypto/sha256"
	"sync"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"google.golang.org/protobuf/proto"
)

// maxEnvSpecs bounds the environment specs a Manager remembers. A spec is
// one workspace with one agent's tools and sandbox; a replica serves few
// at a time, and one it forgot costs an environment made at once instead
// of at the first tool call.
const maxEnvSpecs = 64

// envSpecs remembers, for each environment spec the environment service
// accepted, what it answered: the workspace resolved to its absolute path
// and the tools. With it, a new session, or a task of a session whose
// environment was disposed while idle, needs no environment until a tool
// call: the spec is known to be valid and the model's tool list known.
// Every environment created refreshes its spec's entry, so an environment
// service that changed its tools (an upgrade, an MCP server that now
// connects) is seen at the next creation; a task that started with an
// older list records the new one at its next task.
type envSpecs struct {
	mu      sync.Mutex
	entries map[[sha256.Size]byte]envFacts
}

// envFacts is what the environment service answered for one spec.
type envFacts struct {
	workspace string
	tools     []*penguinv1.ToolInfo
}

// specKey identifies a spec by all it holds but its label, which names
// the session and changes nothing the environment offers.
func specKey(req *penguinv1.CreateEnvironmentRequest) [sha256.Size]byte {
	c := proto.Clone(req).(*penguinv1.CreateEnvironmentRequest)
	c.Label = ""
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	return sha256.Sum256(b)
}

// get returns what the environment service answered for req.
func (s *envSpecs) get(req *penguinv1.CreateEnvironmentRequest) (envFacts, bool) {
	k := specKey(req)
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.entries[k]
	return f, ok
}

// put records what the environment service answered for req, under req
// as sent and under req with the workspace it resolved (what a session's
// row holds, and so what its later tasks ask about).
// A spec with MCP servers is not remembered: its tools are what the
// servers answer each time they connect, not a fact of the spec.
func (s *envSpecs) put(req *penguinv1.CreateEnvironmentRequest, resp *penguinv1.CreateEnvironmentResponse) {
	if len(req.GetTools().GetMcpServers()) > 0 {
		return
	}
	f := envFacts{workspace: resp.GetWorkspace(), tools: resp.GetTools()}
	keys := [][sha256.Size]byte{specKey(req)}
	if f.workspace != "" && f.workspace != req.GetWorkspace() {
		resolved := proto.Clone(req).(*penguinv1.CreateEnvironmentRequest)
		resolved.Workspace = f.workspace
		keys = append(keys, specKey(resolved))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.entries == nil {
		s.entries = map[[sha256.Size]byte]envFacts{}
	}
	for _, k := range keys {
		if _, ok := s.entries[k]; !ok && len(s.entries) >= maxEnvSpecs {
			for old := range s.entries {
				delete(s.entries, old)
				break
			}
		}
		s.entries[k] = f
	}
}
