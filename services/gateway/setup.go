package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/services/llm/providers"
)

// First run: the web app's form adds a provider route to the llm
// service's providers file, which the llm service reloads when it changes.
// The key goes to a file of its own beside the providers file, readable by
// the owner alone, and the route names it with api_key_file, so the
// providers file stays free of secrets. The route entry is edited in the
// file's YAML tree, so the other routes and the comments stay as they
// were, and both the route and the whole file are checked with the llm
// service's own validation before anything is written. The answer comes
// once the llm service lists the new route (or after a few seconds, saying
// it does not yet), so the app can offer its models at once.

// providerForm is the body of POST /api/setup/provider.
type providerForm struct {
	// Name is the route's name, the provider half of a model reference.
	// A catalog provider's id (openai, anthropic, …) gives the route that
	// provider's models and prices.
	Name string `json:"name"`
	// Type is the wire protocol: a providers file type (openai,
	// openai-responses, anthropic, gemini, …).
	Type string `json:"type"`
	// BaseURL is the API base; empty means the vendor's own API.
	BaseURL string `json:"base_url"`
	// APIKey is the key, written to the key file. It may be empty for a
	// server of one's own (a base URL is then required).
	APIKey string `json:"api_key"`
	// Models are model ids to list for the route, beside the catalog's.
	Models []string `json:"models"`
}

var (
	routeName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`) })
	modelID   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}$`) })
)

// check refuses a form the gateway must not write: a name that is not a
// safe file name (the key file is named after it), a key that could not
// go in a header, too many or malformed model ids. What makes a valid
// route is the providers package's to say (see route).
func (f *providerForm) check() error {
	switch {
	case !routeName().MatchString(f.Name):
		return errors.New("name: use 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	case len(f.APIKey) > 4096 || strings.IndexFunc(f.APIKey, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0:
		return errors.New("api_key: a key of printable characters without spaces")
	case f.APIKey == "" && f.BaseURL == "":
		return errors.New("api_key: required for a vendor's API (only a server of your own, at a base URL, may have none)")
	case len(f.Models) > 50:
		return errors.New("models: at most 50")
	}
	for _, m := range f.Models {
		if !modelID().MatchString(m) {
			return fmt.Errorf("models: %q is not a model id", m)
		}
	}
	return nil
}

// route is the providers file's route for the form, its key in keyFile,
// checked as the llm service checks every route.
func (f *providerForm) route(keyFile string) (providers.Provider, error) {
	p := providers.Provider{Name: f.Name, Type: f.Type, BaseURL: f.BaseURL}
	if f.APIKey != "" {
		p.APIKeyFile = keyFile
	}
	for _, id := range f.Models {
		p.Models = append(p.Models, providers.Model{ID: id})
	}
	err := (&providers.File{Providers: []providers.Provider{p}}).Validate()
	return p, err
}

// catalogProvider is a provider the form offers: a catalog provider that
// a key turns on.
type catalogProvider struct {
	// ID is the route's name, and the catalog provider it follows.
	ID string `json:"id"`
	// Name is the display name.
	Name string `json:"name"`
	// Type is the route's wire protocol.
	Type string `json:"type"`
	// BaseURL is the vendor's API.
	BaseURL string `json:"base_url"`
	// KeyVar is the environment variable that would turn it on instead.
	KeyVar string `json:"key_var"`
	// Models is how many models the catalog lists for it.
	Models int `json:"models"`
}

// setupState is the answer of GET /api/setup.
type setupState struct {
	// ProvidersFile is where the form writes; empty when the server was
	// started without one, and the form is refused.
	ProvidersFile string `json:"providers_file"`
	// Providers are the catalog's providers, for the form's list.
	Providers []catalogProvider `json:"providers"`
}

// offered lists the built-in catalog's providers that take a key. (A
// provider that only a --catalog override adds is still reachable through
// the form: a route named like it follows it.) A catalog's API names are
// providers file types.
var offered = sync.OnceValue(func() []catalogProvider {
	var out []catalogProvider
	for _, p := range catalog.Builtin().Providers {
		if v := providers.KeyVar(p); v != "" && p.API != "" {
			out = append(out, catalogProvider{ID: p.ID, Name: p.Name, Type: p.API, BaseURL: p.BaseURL, KeyVar: v, Models: len(p.Models)})
		}
	}
	return out
})

func (g *Gateway) setupStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, setupState{ProvidersFile: g.opts.ProvidersFile, Providers: offered()})
}

// setupResult is the answer of POST /api/setup/provider.
type setupResult struct {
	Provider      string `json:"provider"`
	ProvidersFile string `json:"providers_file"`
	// KeyFile is where the key went; empty for a route without one.
	KeyFile string `json:"key_file,omitempty"`
	// Active says whether the llm service lists the route as written.
	Active bool `json:"active"`
	// Notice is what the llm service says about its configuration when the
	// route is not active (an error in the file, say).
	Notice string `json:"notice,omitempty"`
}

// setupProvider serves POST /api/setup/provider.
func (g *Gateway) setupProvider(w http.ResponseWriter, r *http.Request) {
	if !requireAdmin(w, r) {
		return
	}
	var form providerForm
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&form); err != nil {
		badRequest(w, "malformed JSON body: "+err.Error())
		return
	}
	if err := form.check(); err != nil {
		badRequest(w, err.Error())
		return
	}
	if g.opts.ProvidersFile == "" {
		writeError(w, codes.FailedPrecondition, "this server was started without a providers file, so the web app cannot add a model: "+
			"restart it with --providers FILE (the file need not exist yet), or set OPENAI_API_KEY or ANTHROPIC_API_KEY in its environment")
		return
	}
	keyFile := filepath.Join(filepath.Dir(g.opts.ProvidersFile), form.Name+".key")
	if abs, err := filepath.Abs(keyFile); err == nil {
		keyFile = abs
	}
	route, err := form.route(keyFile)
	if err != nil {
		badRequest(w, err.Error())
		return
	}
	g.setupMu.Lock()
	err = writeProvider(g.opts.ProvidersFile, route, form.APIKey)
	g.setupMu.Unlock()
	var bad *invalidFileError
	switch {
	case errors.As(err, &bad):
		writeError(w, codes.FailedPrecondition, err.Error())
		return
	case err != nil:
		g.opts.Logger.Warn("the providers file could not be written", "file", g.opts.ProvidersFile, "error", err)
		writeError(w, codes.Internal, "the providers file could not be written; see the server's log")
		return
	}
	g.opts.Logger.Info("provider route written by the web app", "provider", form.Name, "file", g.opts.ProvidersFile)
	res := setupResult{Provider: form.Name, ProvidersFile: g.opts.ProvidersFile, KeyFile: route.APIKeyFile}
	res.Active, res.Notice = g.awaitRoute(r.Context(), route)
	writeJSON(w, http.StatusOK, res)
}

// routeWait bounds how long the form's answer waits for the llm service to
// list a route it wrote; the service looks at the file every two seconds.
const routeWait = 8 * time.Second

// awaitRoute polls the llm service until it lists route as written (name,
// type, base URL and key file), for at most routeWait. It returns whether
// it did, and the service's notice when it did not. Without an llm client
// it cannot tell, and says so.
func (g *Gateway) awaitRoute(ctx context.Context, route providers.Provider) (bool, string) {
	if g.opts.LLM == nil {
		return false, "this gateway has no llm service to ask whether it uses the route"
	}
	ctx, cancel := context.WithTimeout(ctx, routeWait)
	defer cancel()
	wantSource := ""
	if route.APIKeyFile != "" {
		wantSource = "file " + route.APIKeyFile
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	notice := ""
	for {
		resp, err := g.opts.LLM.ListProviders(ctx, &penguinv1.ListProvidersRequest{})
		if err == nil {
			notice = resp.GetNotice()
			for _, p := range resp.GetProviders() {
				if p.GetName() == route.Name && p.GetCredentialSource() == wantSource &&
					(route.BaseURL == "" || p.GetBaseUrl() == route.BaseURL) && sameType(p.GetType(), route.Type) {
					return true, ""
				}
			}
		} else if status.Code(err) != codes.DeadlineExceeded && status.Code(err) != codes.Canceled {
			notice = status.Convert(err).Message()
		}
		select {
		case <-ctx.Done():
			if notice == "" {
				notice = fmt.Sprintf("the llm service did not list the route within %s; it reads the providers file every few seconds", routeWait)
			}
			return false, notice
		case <-tick.C:
		}
	}
}

// sameType reports whether two route types name one wire protocol
// ("openai" is the short name of Chat Completions).
func sameType(a, b string) bool {
	norm := func(t string) string {
		if t == providers.TypeOpenAI {
			return providers.TypeOpenAIChat
		}
		return t
	}
	return norm(a) == norm(b)
}

// invalidFileError reports a providers file that cannot be edited: it does
// not parse, or the edit would not.
type invalidFileError struct{ err error }

func (e *invalidFileError) Error() string { return "the providers file: " + e.err.Error() }

// writeProvider puts route in place of the route of the same name in the
// providers file at path (or adds it), and writes key to the route's key
// file (mode 0600) first, so the llm service never reads a route whose
// key is not there yet.
func writeProvider(path string, route providers.Provider, key string) error {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	var node yaml.Node
	if err := node.Encode(route); err != nil {
		return err
	}
	doc, err := withRoute(old, route.Name, &node)
	if err != nil {
		return &invalidFileError{err}
	}
	if _, err := providers.Parse(doc); err != nil {
		return &invalidFileError{err}
	}
	if route.APIKeyFile != "" {
		if err := writeAtomic(route.APIKeyFile, []byte(key+"\n"), 0o600); err != nil {
			return err
		}
	}
	return writeAtomic(path, doc, 0o644)
}

// withRoute returns the providers document old (possibly empty) with
// route in place of the route called name, or appended.
func withRoute(old []byte, name string, route *yaml.Node) ([]byte, error) {
	var doc yaml.Node
	if len(bytes.TrimSpace(old)) > 0 {
		if err := yaml.Unmarshal(old, &doc); err != nil {
			return nil, err
		}
	}
	if doc.Kind == 0 {
		doc = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode}}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("it is not a mapping with a providers list")
	}
	top := doc.Content[0]
	var list *yaml.Node
	for i := 0; i+1 < len(top.Content); i += 2 {
		if top.Content[i].Value == "providers" {
			list = top.Content[i+1]
		}
	}
	if list == nil {
		list = &yaml.Node{Kind: yaml.SequenceNode}
		top.Content = append(top.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: "providers"}, list)
	}
	if list.Kind != yaml.SequenceNode {
		return nil, errors.New("providers is not a list")
	}
	replaced := false
	for i, p := range list.Content {
		for j := 0; p.Kind == yaml.MappingNode && j+1 < len(p.Content); j += 2 {
			if p.Content[j].Value == "name" && p.Content[j+1].Value == name {
				list.Content[i], replaced = route, true
			}
		}
	}
	if !replaced {
		list.Content = append(list.Content, route)
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// writeAtomic replaces path with data: written to a temporary file in the
// same directory and renamed over it, so a reader (the llm service
// reloading) never sees half a file, and a symbolic link at path is
// replaced rather than followed.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
