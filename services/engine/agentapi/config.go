package agentapi

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"gopkg.in/yaml.v3"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// maxConfigBytes bounds system_config.yaml and AGENTS.md.
const maxConfigBytes = 1 << 20

// configFile checks that a request names one of the two configuration
// files.
func configFile(name string) error {
	if name != agentstate.ConfigFile && name != agentstate.AgentsFile {
		return invalid("file", "%q is neither %s nor %s", name, agentstate.ConfigFile, agentstate.AgentsFile)
	}
	return nil
}

// GetAgentConfig implements AgentService.
func (s *Server) GetAgentConfig(ctx context.Context, req *penguinv1.GetAgentConfigRequest) (*penguinv1.GetAgentConfigResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	if err := configFile(req.GetFile()); err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	f := files[req.GetFile()]
	return &penguinv1.GetAgentConfigResponse{Content: string(f.Data), Version: f.Version}, nil
}

// UpdateAgentConfig implements AgentService. The text is stored as it was
// written, so its comments and key order stay.
func (s *Server) UpdateAgentConfig(ctx context.Context, req *penguinv1.UpdateAgentConfigRequest) (*penguinv1.UpdateAgentConfigResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := configFile(req.GetFile()); err != nil {
		return nil, err
	}
	data := []byte(req.GetContent())
	if err := checkText("content", data, maxConfigBytes); err != nil {
		return nil, err
	}
	if req.GetFile() == agentstate.ConfigFile {
		if _, err := agentconfig.Parse(agentstate.ConfigFile, data); err != nil {
			return nil, invalid("content", "%v", err)
		}
	}
	if req.GetVersion() < 0 {
		return nil, invalid("version", "must not be negative")
	}
	a, err := s.change(ctx, t, req.GetFile(), []store.AgentChange{{Path: req.GetFile(), Data: data, IfVersion: req.GetVersion()}})
	if err != nil {
		return nil, err
	}
	return &penguinv1.UpdateAgentConfigResponse{Version: a.Version}, nil
}

// checkText refuses text that is not UTF-8 or longer than max bytes.
func checkText(field string, data []byte, max int) error {
	if len(data) > max {
		return invalid(field, "%d bytes; at most %d are accepted", len(data), max)
	}
	if !utf8.Valid(data) {
		return invalid(field, "not UTF-8 text")
	}
	return nil
}

// editConfig changes system_config.yaml through its YAML nodes, so that
// the comments and key order of the rest stay, validates the result as a
// write of the whole file is, and writes it on condition that the file
// did not change meanwhile; when it did, the edit is made again on the
// new text, a few times.
func (s *Server) editConfig(ctx context.Context, t target, what, field string, edit func(cfg agentconfig.Config, doc *yaml.Node) error) error {
	for attempt := 0; ; attempt++ {
		_, files, err := s.files(ctx, t)
		if err != nil {
			return err
		}
		old := files[agentstate.ConfigFile]
		cfg, err := agentconfig.Parse(agentstate.ConfigFile, old.Data)
		if err != nil {
			return status.Errorf(codes.FailedPrecondition, "the agent's configuration does not load; fix it first: %v", err)
		}
		var root yaml.Node
		if err := yaml.Unmarshal(old.Data, &root); err != nil {
			return status.Errorf(codes.FailedPrecondition, "the agent's configuration does not parse: %v", err)
		}
		if root.Kind == 0 {
			root = yaml.Node{Kind: yaml.DocumentNode, Content: []*yaml.Node{{Kind: yaml.MappingNode, Tag: "!!map"}}}
		}
		doc := root.Content[0]
		if doc.Kind != yaml.MappingNode {
			doc.Kind, doc.Tag, doc.Value, doc.Content = yaml.MappingNode, "!!map", "", nil
		}
		if err := edit(cfg, doc); err != nil {
			return err
		}
		var b bytes.Buffer
		enc := yaml.NewEncoder(&b)
		enc.SetIndent(2)
		if err := enc.Encode(&root); err != nil {
			return status.Errorf(codes.Internal, "encode the configuration: %v", err)
		}
		if err := enc.Close(); err != nil {
			return status.Errorf(codes.Internal, "encode the configuration: %v", err)
		}
		if _, err := agentconfig.Parse(agentstate.ConfigFile, b.Bytes()); err != nil {
			return invalid(field, "%v", err)
		}
		_, err = s.change(ctx, t, what, []store.AgentChange{{Path: agentstate.ConfigFile, Data: b.Bytes(), IfVersion: old.Version}})
		if status.Code(err) != codes.Aborted || attempt == 2 {
			return err
		}
	}
}

// mapValue returns the value of key in a mapping node, or nil.
func mapValue(m *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// mapDelete removes key from a mapping node.
func mapDelete(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			m.Content = slices.Delete(m.Content, i, i+2)
			return
		}
	}
}

// dropEmpty removes key from a mapping node when an edit left its value
// an empty mapping, so that the file reads as if never edited; a key
// with comments around it (the template's "tools:" over its commented
// examples) stays, as the empty value it was.
func dropEmpty(m *yaml.Node, key string) {
	for i := 0; i+1 < len(m.Content); i += 2 {
		k, v := m.Content[i], m.Content[i+1]
		if k.Value != key || v.Kind != yaml.MappingNode || len(v.Content) > 0 {
			continue
		}
		if k.HeadComment+k.LineComment+k.FootComment+v.HeadComment+v.LineComment+v.FootComment == "" {
			m.Content = slices.Delete(m.Content, i, i+2)
		} else {
			v.Kind, v.Tag, v.Value = yaml.ScalarNode, "!!null", ""
		}
		return
	}
}

// mapEnsure returns the value of key in a mapping node, adding it (as
// kind) when missing.
func mapEnsure(m *yaml.Node, key string, kind yaml.Kind) *yaml.Node {
	if v := mapValue(m, key); v != nil {
		if v.Kind != kind {
			v.Kind, v.Value, v.Content, v.Tag = kind, "", nil, ""
		}
		return v
	}
	v := &yaml.Node{Kind: kind}
	m.Content = append(m.Content, &yaml.Node{Kind: yaml.ScalarNode, Value: key}, v)
	return v
}

// GetAgentModel implements AgentService.
func (s *Server) GetAgentModel(ctx context.Context, req *penguinv1.GetAgentModelRequest) (*penguinv1.GetAgentModelResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	f := files[agentstate.ConfigFile]
	cfg, err := agentconfig.Parse(agentstate.ConfigFile, f.Data)
	if err != nil {
		return nil, status.Errorf(codes.FailedPrecondition, "the agent's configuration does not load: %v", err)
	}
	return &penguinv1.GetAgentModelResponse{Model: cfg.Model.Ref(), Version: f.Version}, nil
}

// SetAgentModel implements AgentService.
func (s *Server) SetAgentModel(ctx context.Context, req *penguinv1.SetAgentModelRequest) (*penguinv1.SetAgentModelResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	m := req.GetModel()
	if m.GetProvider() == "" || m.GetModelId() == "" {
		return nil, invalid("model", "give both provider and model_id")
	}
	if err := s.checkRoute(ctx, t.project, m); err != nil {
		return nil, err
	}
	err = s.editConfig(ctx, t, "model", "model", func(_ agentconfig.Config, doc *yaml.Node) error {
		model := mapEnsure(doc, "model", yaml.MappingNode)
		mapEnsure(model, "provider", yaml.ScalarNode).Value = m.GetProvider()
		mapEnsure(model, "model_id", yaml.ScalarNode).Value = m.GetModelId()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &penguinv1.SetAgentModelResponse{}, nil
}

// checkRoute refuses a model whose provider is not a route the project
// reaches (its own or a global one), naming the routes it has, so that an
// agent's default model is one its sessions can run on. Without an llm
// service nothing is checked.
func (s *Server) checkRoute(ctx context.Context, project string, m *penguinv1.ModelRef) error {
	if s.opts.LLM == nil {
		return nil
	}
	resp, err := s.opts.LLM.ListProviders(ctx, &penguinv1.ListProvidersRequest{Project: project}, grpc.WaitForReady(true))
	if err != nil {
		return status.Errorf(codes.Unavailable, "the llm service could not list the provider routes: %s", status.Convert(err).Message())
	}
	var names []string
	for _, p := range resp.GetProviders() {
		if p.GetName() == m.GetProvider() {
			return nil
		}
		names = append(names, p.GetName())
	}
	if len(names) == 0 {
		return invalid("model.provider", "%q is not a provider route of project %s, which has none yet: add one first", m.GetProvider(), project)
	}
	return invalid("model.provider", "%q is not a provider route of project %s; it has %s", m.GetProvider(), project, strings.Join(names, ", "))
}

// modelTestTimeout bounds TestModel.
const modelTestTimeout = 60 * time.Second

// TestModel implements AgentService: one short request through the llm
// service, its latency or its failure.
func (s *Server) TestModel(ctx context.Context, req *penguinv1.TestModelRequest) (*penguinv1.TestModelResponse, error) {
	project, err := s.project(ctx, req.GetProject(), access.Write)
	if err != nil {
		return nil, err
	}
	m := req.GetModel()
	if m.GetProvider() == "" || m.GetModelId() == "" {
		return nil, invalid("model", "give both provider and model_id")
	}
	if s.opts.LLM == nil {
		return nil, status.Error(codes.Unavailable, "this engine has no llm service")
	}
	ctx, cancel := context.WithTimeout(ctx, modelTestTimeout)
	defer cancel()
	start := time.Now()
	stream, err := s.opts.LLM.StreamGenerate(ctx, &penguinv1.StreamGenerateRequest{
		Model:       m,
		Project:     project,
		NewMessages: []*penguinv1.OmniMessage{omni.UserText("Reply with the word ok.")},
		MaxTokens:   16,
	}, grpc.WaitForReady(true))
	if err == nil {
		err = drain(stream)
	}
	if err != nil {
		return &penguinv1.TestModelResponse{Ok: false, Message: status.Convert(err).Message()}, nil
	}
	return &penguinv1.TestModelResponse{Ok: true, LatencyMs: time.Since(start).Milliseconds()}, nil
}

// drain reads a generation to its end and returns the failure it reports.
func drain(stream grpc.ServerStreamingClient[penguinv1.StreamGenerateResponse]) error {
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return status.Error(codes.Unavailable, "the llm service ended the stream without an outcome")
		}
		if err != nil {
			return err
		}
		if o := resp.GetOutcome(); o != nil {
			if o.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
				return status.Errorf(codes.Unavailable, "%s: %s", enumword.Word(o.GetStatus()), o.GetMessage())
			}
			return nil
		}
	}
}
