package agentapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Memory layout: memory/<scope>/<file>.md, the scope "user" or a
// workspace's key, whose .workspace file says which directory it stands
// for.
const (
	userScope       = "user"
	workspaceMarker = ".workspace"
)

// scopeRe is what a scope key may be: "user", or a workspace key
// (agentstate.MemoryKey: a safe base name, a hyphen, eight hex digits).
var scopeRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^(user|[A-Za-z0-9_.-]{1,40}-[0-9a-f]{8})$`) })

func scopePrefix(scope string) string { return agentstate.MemoryDir + "/" + scope + "/" }

// memoryTarget checks a memory request's agent and scope.
func (s *Server) memoryTarget(ctx context.Context, req interface {
	agentRequest
	GetScope() string
}, lvl access.Level) (target, string, error) {
	t, err := s.targetOf(ctx, req, lvl)
	if err != nil {
		return t, "", err
	}
	if !scopeRe().MatchString(req.GetScope()) {
		return t, "", invalid("scope", "%q is neither \"user\" nor a workspace key", req.GetScope())
	}
	return t, req.GetScope(), nil
}

func checkMemoryName(name string) error {
	if !agentstate.ValidMemoryFileName(name) {
		return invalid("name", "%q is not a memory file name (letters, digits, \".\", \"_\" and \"-\", ending in .md)", name)
	}
	return nil
}

// ListMemoryScopes implements AgentService.
func (s *Server) ListMemoryScopes(ctx context.Context, req *penguinv1.ListMemoryScopesRequest) (*penguinv1.ListMemoryScopesResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	cfg, _ := agentconfig.Parse(agentstate.ConfigFile, files[agentstate.ConfigFile].Data)
	scopes := map[string]*penguinv1.MemoryScope{userScope: {Key: userScope}}
	for _, p := range underPrefix(files, agentstate.MemoryDir+"/") {
		key, name, ok := strings.Cut(strings.TrimPrefix(p, agentstate.MemoryDir+"/"), "/")
		if !ok || !scopeRe().MatchString(key) || strings.Contains(name, "/") {
			continue
		}
		sc := scopes[key]
		if sc == nil {
			sc = &penguinv1.MemoryScope{Key: key}
			scopes[key] = sc
		}
		if name == workspaceMarker {
			sc.Workspace = strings.TrimSpace(string(files[p].Data))
		} else if agentstate.ValidMemoryFileName(name) {
			sc.Files++
		}
	}
	resp := &penguinv1.ListMemoryScopesResponse{Enabled: cfg.Memory.Enabled, Scopes: []*penguinv1.MemoryScope{scopes[userScope]}}
	delete(scopes, userScope)
	for _, k := range slices.Sorted(maps.Keys(scopes)) {
		resp.Scopes = append(resp.Scopes, scopes[k])
	}
	return resp, nil
}

// ListMemoryFiles implements AgentService.
func (s *Server) ListMemoryFiles(ctx context.Context, req *penguinv1.ListMemoryFilesRequest) (*penguinv1.ListMemoryFilesResponse, error) {
	t, scope, err := s.memoryTarget(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	resp := &penguinv1.ListMemoryFilesResponse{}
	for _, p := range underPrefix(files, scopePrefix(scope)) {
		name := strings.TrimPrefix(p, scopePrefix(scope))
		if !agentstate.ValidMemoryFileName(name) {
			continue
		}
		f := files[p]
		resp.Files = append(resp.Files, &penguinv1.MemoryFile{Name: name, FrontMatter: frontMatter(f.Data), Bytes: int64(len(f.Data)), Version: f.Version})
	}
	return resp, nil
}

// frontMatter returns the scalar keys of a Markdown file's front matter;
// none when it has none or it does not parse.
func frontMatter(data []byte) map[string]string {
	text := strings.ReplaceAll(string(data), "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return nil
	}
	body, _, ok := strings.Cut(text[4:], "\n---")
	if !ok {
		return nil
	}
	var m map[string]any
	if yaml.Unmarshal([]byte(body), &m) != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range m {
		switch v.(type) {
		case map[string]any, []any, nil:
		default:
			out[k] = fmt.Sprint(v)
		}
	}
	return out
}

// GetMemoryFile implements AgentService.
func (s *Server) GetMemoryFile(ctx context.Context, req *penguinv1.GetMemoryFileRequest) (*penguinv1.GetMemoryFileResponse, error) {
	t, scope, err := s.memoryTarget(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	if err := checkMemoryName(req.GetName()); err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	f, ok := files[scopePrefix(scope)+req.GetName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "memory scope %s has no file %s", scope, req.GetName())
	}
	return &penguinv1.GetMemoryFileResponse{Content: string(f.Data), Version: f.Version}, nil
}

// UpdateMemoryFile implements AgentService.
func (s *Server) UpdateMemoryFile(ctx context.Context, req *penguinv1.UpdateMemoryFileRequest) (*penguinv1.UpdateMemoryFileResponse, error) {
	t, scope, err := s.memoryTarget(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := checkMemoryName(req.GetName()); err != nil {
		return nil, err
	}
	if err := checkText("content", []byte(req.GetContent()), agentstate.MaxMemoryFileBytes); err != nil {
		return nil, err
	}
	if req.GetVersion() < 0 {
		return nil, invalid("version", "must not be negative")
	}
	a, err := s.change(ctx, t, "memory "+scope+"/"+req.GetName(), []store.AgentChange{{
		Path: scopePrefix(scope) + req.GetName(), Data: []byte(req.GetContent()), IfVersion: req.GetVersion(),
	}})
	if err != nil {
		return nil, err
	}
	return &penguinv1.UpdateMemoryFileResponse{Version: a.Version}, nil
}

// DeleteMemoryFile implements AgentService: the file goes, and so do the
// lines of the scope's MEMORY.md that name it, in one change.
func (s *Server) DeleteMemoryFile(ctx context.Context, req *penguinv1.DeleteMemoryFileRequest) (*penguinv1.DeleteMemoryFileResponse, error) {
	t, scope, err := s.memoryTarget(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := checkMemoryName(req.GetName()); err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	p := scopePrefix(scope) + req.GetName()
	f, ok := files[p]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "memory scope %s has no file %s", scope, req.GetName())
	}
	changes := []store.AgentChange{{Path: p, Delete: true, IfVersion: f.Version}}
	pruned := 0
	if idx, ok := files[scopePrefix(scope)+agentstate.MemoryIndexFile]; ok && req.GetName() != agentstate.MemoryIndexFile {
		var kept [][]byte
		for _, line := range bytes.SplitAfter(idx.Data, []byte("\n")) {
			if bytes.Contains(line, []byte(req.GetName())) {
				pruned++
				continue
			}
			kept = append(kept, line)
		}
		if pruned > 0 {
			changes = append(changes, store.AgentChange{Path: scopePrefix(scope) + agentstate.MemoryIndexFile, Data: bytes.Join(kept, nil), IfVersion: idx.Version})
		}
	}
	if _, err := s.change(ctx, t, "delete memory "+scope+"/"+req.GetName(), changes); err != nil {
		return nil, err
	}
	return &penguinv1.DeleteMemoryFileResponse{Pruned: int32(pruned)}, nil
}

// memoryDocument is a scope exported as one JSON document.
type memoryDocument struct {
	Scope string            `json:"scope"`
	Files map[string]string `json:"files"`
}

// ExportMemory implements AgentService.
func (s *Server) ExportMemory(ctx context.Context, req *penguinv1.ExportMemoryRequest) (*penguinv1.ExportMemoryResponse, error) {
	t, scope, err := s.memoryTarget(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	doc := memoryDocument{Scope: scope, Files: map[string]string{}}
	for _, p := range underPrefix(files, scopePrefix(scope)) {
		if name := strings.TrimPrefix(p, scopePrefix(scope)); agentstate.ValidMemoryFileName(name) {
			doc.Files[name] = string(files[p].Data)
		}
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode the memory: %v", err)
	}
	return &penguinv1.ExportMemoryResponse{Document: string(out)}, nil
}

// Import modes.
const (
	importSkip      = "skip"
	importOverwrite = "overwrite"
	importReplace   = "replace"
)

// ImportMemory implements AgentService. The document is checked whole
// (its JSON, every name, every size, the scope's bounds) before anything
// is written, and everything is written in one change.
func (s *Server) ImportMemory(ctx context.Context, req *penguinv1.ImportMemoryRequest) (*penguinv1.ImportMemoryResponse, error) {
	t, scope, err := s.memoryTarget(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	mode := req.GetMode()
	if mode == "" {
		mode = importSkip
	}
	switch mode {
	case importSkip:
	case importOverwrite, importReplace:
		if !req.GetConfirm() {
			return nil, status.Errorf(codes.FailedPrecondition, "confirm: mode %s overwrites or deletes memory files; set confirm to go ahead", mode)
		}
	default:
		return nil, invalid("mode", "%q is not skip, overwrite or replace", mode)
	}
	var doc memoryDocument
	dec := json.NewDecoder(strings.NewReader(req.GetDocument()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil {
		return nil, invalid("document", "not a memory export (%v); expected {\"scope\": ..., \"files\": {NAME: CONTENT}}", err)
	}
	if dec.More() {
		return nil, invalid("document", "text after the JSON document")
	}
	if doc.Files == nil {
		return nil, invalid("document.files", "missing")
	}
	var total int
	for name, content := range doc.Files {
		if !agentstate.ValidMemoryFileName(name) {
			return nil, invalid("document.files", "%q is not a memory file name", name)
		}
		if err := checkText("document.files."+name, []byte(content), agentstate.MaxMemoryFileBytes); err != nil {
			return nil, err
		}
		total += len(content)
	}
	if len(doc.Files) > agentstate.MaxMemoryScopeFiles || total > agentstate.MaxMemoryScopeBytes {
		return nil, invalid("document.files", "more than a scope holds (%d files, %d bytes)", agentstate.MaxMemoryScopeFiles, agentstate.MaxMemoryScopeBytes)
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	resp := &penguinv1.ImportMemoryResponse{}
	var changes []store.AgentChange
	for _, name := range slices.Sorted(maps.Keys(doc.Files)) {
		p := scopePrefix(scope) + name
		old, exists := files[p]
		if exists && mode == importSkip {
			resp.Skipped++
			continue
		}
		cond := store.Absent
		if exists {
			cond = old.Version
		}
		changes = append(changes, store.AgentChange{Path: p, Data: []byte(doc.Files[name]), IfVersion: cond})
		resp.Written++
	}
	if mode == importReplace {
		for _, p := range underPrefix(files, scopePrefix(scope)) {
			name := strings.TrimPrefix(p, scopePrefix(scope))
			if _, ok := doc.Files[name]; !ok && agentstate.ValidMemoryFileName(name) {
				changes = append(changes, store.AgentChange{Path: p, Delete: true, IfVersion: files[p].Version})
				resp.Deleted++
			}
		}
	}
	if len(changes) > 0 {
		if _, err := s.change(ctx, t, "import memory "+scope+" "+mode, changes); err != nil {
			return nil, err
		}
	}
	return resp, nil
}
