package catalog

import "slices"

// keyVars overrides the catalog's key variables where two catalog
// providers share one: Z.AI's international API and Zhipu's both list
// ZHIPU_API_KEY, and a key works for only one of them.
var keyVars = map[string][]string{
	"zai":    {"ZAI_API_KEY"},
	"google": {"GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GENERATIVE_AI_API_KEY"},
}

// localServers are the catalog providers that are servers of one's own,
// which take no key: their routes are turned on by their address.
var localServers = []string{"ollama", "vllm", "llamacpp", "lmstudio"}

// KeyVars returns the environment variables that hold a key for p, the
// usual one first; none for a nil provider.
func (p *Provider) KeyVars() []string {
	if p == nil {
		return nil
	}
	if v, ok := keyVars[p.ID]; ok {
		return v
	}
	return p.Env
}

// Local reports whether p is a server of one's own, which takes no key.
func (p *Provider) Local() bool { return p != nil && slices.Contains(localServers, p.ID) }

// KeyVar returns the variable that usually holds p's key, or "" for a
// local server's.
func (p *Provider) KeyVar() string {
	if vars := p.KeyVars(); len(vars) > 0 && !p.Local() {
		return vars[0]
	}
	return ""
}
