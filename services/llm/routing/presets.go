package routing

import (
	"fmt"
	"net/url"
	"slices"
	"strings"

	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/config"
)

// presetTypes are the providers file types of the catalog's APIs that
// presets are made for.
var presetTypes = map[string]string{
	catalog.APIOpenAIChat:      TypeOpenAI,
	catalog.APIOpenAIResponses: TypeOpenAIResponses,
	catalog.APIAnthropic:       TypeAnthropic,
	catalog.APIGemini:          TypeGemini,
}

// localServer is a local OpenAI-compatible server: no key, a local base
// URL, turned on by its variable.
type localServer struct {
	name    string
	urlVar  string // the base URL, or Ollama's host[:port]
	keyVar  string // an optional key
	catalog string
	path    string // appended to a bare host
}

var localServers = []localServer{
	{name: "ollama", urlVar: "OLLAMA_HOST", path: "/v1"},
	{name: "vllm", urlVar: "VLLM_BASE_URL", keyVar: "VLLM_API_KEY"},
	{name: "llamacpp", urlVar: "LLAMACPP_BASE_URL", keyVar: "LLAMACPP_API_KEY"},
	{name: "lmstudio", urlVar: "LMSTUDIO_BASE_URL", keyVar: "LMSTUDIO_API_KEY", catalog: "lmstudio"},
}

// usual orders the catalog providers that people use most first, for
// messages; the others follow in catalog order.
var usual = []string{"openai", "anthropic", "deepseek", "google", "mistral", "xai", "groq", "openrouter", "alibaba", "moonshotai", "zhipuai"}

// KeyVars returns the variable that turns on the preset of each catalog
// provider, the most used providers first, for messages that say how to
// add one.
func KeyVars(cat *catalog.Catalog) []string {
	var out []string
	add := func(p *catalog.Provider) {
		if v := p.KeyVar(); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	for _, id := range usual {
		add(cat.Provider(id))
	}
	for _, p := range cat.Providers {
		add(p)
	}
	return out
}

// FromEnv returns the routes that the environment turns on, one variable
// each: every catalog provider whose key variable is set (OPENAI_API_KEY,
// ANTHROPIC_API_KEY, DEEPSEEK_API_KEY, GEMINI_API_KEY, MISTRAL_API_KEY,
// XAI_API_KEY, GROQ_API_KEY, OPENROUTER_API_KEY, DASHSCOPE_API_KEY,
// MOONSHOT_API_KEY, ZHIPU_API_KEY, …), at its PREFIX_BASE_URL when that is
// set too (OPENAI_BASE_URL for OPENAI_API_KEY), else at the vendor's API;
// and the local servers whose address is set: OLLAMA_HOST, VLLM_BASE_URL,
// LLAMACPP_BASE_URL, LMSTUDIO_BASE_URL, with no key. An address that is
// not a URL is an error, naming the variable.
func FromEnv(lookup config.LookupFunc, cat *catalog.Catalog) (*File, error) {
	f := &File{}
	set := func(name string) (string, bool) {
		v, ok := lookup(name)
		v = strings.TrimSpace(v)
		return v, ok && v != ""
	}
	for _, p := range cat.Providers {
		typ, ok := presetTypes[p.API]
		if p.Local() || !ok {
			continue
		}
		for _, kv := range p.KeyVars() {
			if _, ok := set(kv); !ok {
				continue
			}
			base := p.BaseURL
			if v, ok := set(strings.TrimSuffix(kv, "_API_KEY") + "_BASE_URL"); ok {
				base = v
			}
			f.Providers = append(f.Providers, Provider{Name: p.ID, Type: typ, BaseURL: base, APIKeyEnv: kv, Catalog: p.ID})
			break
		}
	}
	for _, s := range localServers {
		v, ok := set(s.urlVar)
		if !ok {
			continue
		}
		base, err := localURL(v, s.path)
		if err != nil {
			return nil, fmt.Errorf("%s=%q: %w", s.urlVar, v, err)
		}
		p := Provider{Name: s.name, Type: TypeOpenAI, BaseURL: base, Catalog: s.catalog}
		if s.catalog == "" {
			p.Catalog = CatalogNone
		}
		if _, ok := set(s.keyVar); ok && s.keyVar != "" {
			p.APIKeyEnv = s.keyVar
		}
		f.Providers = append(f.Providers, p)
	}
	return f, nil
}

// localURL turns a local server's variable into its base URL: a URL is
// taken as is, a bare host[:port] (Ollama's form) gets http:// and path.
func localURL(v, path string) (string, error) {
	if !strings.Contains(v, "://") {
		v = "http://" + v
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("want an http(s) URL or host:port")
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = path
	}
	return strings.TrimRight(u.String(), "/"), nil
}
