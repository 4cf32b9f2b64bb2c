package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"unicode"

	"google.golang.org/grpc/codes"
	"gopkg.in/yaml.v3"

	"github.com/penguin-agent/penguin/services/llm/providers"
)

// First run: the web app's form adds a provider route to the llm
// service's providers file, which the llm service reloads when it changes.
// The key goes to a file of its own beside the providers file, readable by
// the owner alone, and the route names it with api_key_file, so the
// providers file stays free of secrets. The route entry is edited in the
// file's YAML tree, so the other routes and the comments stay as they
// were, and the result is checked with the llm service's own parser before
// anything is written.

// providerForm is the body of POST /api/setup/provider.
type providerForm struct {
	// Name is the route's name, the provider half of a model reference.
	Name string `json:"name"`
	// Type is the adapter: openai or anthropic.
	Type string `json:"type"`
	// BaseURL is the API base; empty means the vendor's own API.
	BaseURL string `json:"base_url"`
	// APIKey is the key, written to the key file.
	APIKey string `json:"api_key"`
	// Models are model ids to list for the route.
	Models []string `json:"models"`
}

var (
	routeName = regexp.MustCompile(`^[a-z0-9][a-z0-9_.-]{0,63}$`)
	modelID   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.:/@+-]{0,199}$`)
)

func (f *providerForm) validate() error {
	switch {
	case !routeName.MatchString(f.Name):
		return errors.New("name: use 1 to 64 lower-case letters, digits, '.', '_' or '-', starting with a letter or digit")
	case f.Type != providers.TypeOpenAI && f.Type != providers.TypeAnthropic:
		return fmt.Errorf("type: want %q or %q", providers.TypeOpenAI, providers.TypeAnthropic)
	case f.APIKey == "" || len(f.APIKey) > 4096 || strings.IndexFunc(f.APIKey, func(r rune) bool { return !unicode.IsPrint(r) || unicode.IsSpace(r) }) >= 0:
		return errors.New("api_key: a key of printable characters without spaces is required")
	case len(f.Models) > 50:
		return errors.New("models: at most 50")
	}
	if f.BaseURL != "" {
		u, err := url.Parse(f.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return errors.New("base_url: want an http:// or https:// URL")
		}
	}
	for _, m := range f.Models {
		if !modelID.MatchString(m) {
			return fmt.Errorf("models: %q is not a model id", m)
		}
	}
	return nil
}

// setupState is the answer of GET /api/setup.
type setupState struct {
	// ProvidersFile is where the form writes; empty when the server was
	// started without one, and the form is refused.
	ProvidersFile string `json:"providers_file"`
}

func (g *Gateway) setupStatus(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, setupState{ProvidersFile: g.opts.ProvidersFile})
}

// setupProvider serves POST /api/setup/provider.
func (g *Gateway) setupProvider(w http.ResponseWriter, r *http.Request) {
	var form providerForm
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&form); err != nil {
		badRequest(w, "malformed JSON body: "+err.Error())
		return
	}
	if err := form.validate(); err != nil {
		badRequest(w, err.Error())
		return
	}
	if g.opts.ProvidersFile == "" {
		writeError(w, codes.FailedPrecondition, "this server was started without a providers file, so the web app cannot add a model: "+
			"restart it with --providers FILE (the file need not exist yet), or set OPENAI_API_KEY or ANTHROPIC_API_KEY in its environment")
		return
	}
	g.setupMu.Lock()
	defer g.setupMu.Unlock()
	keyFile, err := writeProvider(g.opts.ProvidersFile, form)
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
	writeJSON(w, http.StatusOK, map[string]string{"provider": form.Name, "providers_file": g.opts.ProvidersFile, "key_file": keyFile})
}

// invalidFileError reports a providers file that cannot be edited: it does
// not parse, or the edit would not.
type invalidFileError struct{ err error }

func (e *invalidFileError) Error() string { return "the providers file: " + e.err.Error() }

// writeProvider adds or replaces the route form.Name in the providers file
// at path and writes its key to a 0600 file beside it. It returns the key
// file's path.
func writeProvider(path string, form providerForm) (string, error) {
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	keyFile := filepath.Join(filepath.Dir(path), form.Name+".key")
	if abs, err := filepath.Abs(keyFile); err == nil {
		keyFile = abs
	}
	doc, err := withRoute(old, routeNode(form, keyFile))
	if err != nil {
		return "", &invalidFileError{err}
	}
	if _, err := providers.Parse(doc); err != nil {
		return "", &invalidFileError{err}
	}
	if err := writeAtomic(keyFile, []byte(form.APIKey+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := writeAtomic(path, doc, 0o644); err != nil {
		return "", err
	}
	return keyFile, nil
}

// routeNode is the YAML mapping of one route.
func routeNode(form providerForm, keyFile string) *yaml.Node {
	m := &yaml.Node{Kind: yaml.MappingNode}
	add := func(k string, v *yaml.Node) {
		m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: k}, v)
	}
	str := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Value: s} }
	add("name", str(form.Name))
	add("type", str(form.Type))
	if form.BaseURL != "" {
		add("base_url", str(form.BaseURL))
	}
	add("api_key_file", str(keyFile))
	if len(form.Models) > 0 {
		seq := &yaml.Node{Kind: yaml.SequenceNode}
		for _, id := range form.Models {
			seq.Content = append(seq.Content, &yaml.Node{Kind: yaml.MappingNode, Content: []*yaml.Node{str("id"), str(id)}})
		}
		add("models", seq)
	}
	return m
}

// withRoute returns the providers document old (possibly empty) with
// route in place of the route of the same name, or appended.
func withRoute(old []byte, route *yaml.Node) ([]byte, error) {
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
	name := route.Content[1].Value
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
