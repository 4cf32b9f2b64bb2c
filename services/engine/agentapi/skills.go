package agentapi

import (
	"context"
	"maps"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// skillDir is where a skill's files live.
func skillDir(name string, enabled bool) string {
	if enabled {
		return agentstate.SkillsDir + "/" + name
	}
	return agentstate.SkillsDir + "/" + agentstate.DisabledSkillsDir + "/" + name
}

// ListSkills implements AgentService.
func (s *Server) ListSkills(ctx context.Context, req *penguinv1.ListSkillsRequest) (*penguinv1.ListSkillsResponse, error) {
	t, err := s.targetOf(ctx, req, access.Read)
	if err != nil {
		return nil, err
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	resp := &penguinv1.ListSkillsResponse{}
	for _, enabled := range []bool{true, false} {
		prefix := skillDir("", enabled)
		byName := map[string]*penguinv1.SkillInfo{}
		for _, p := range underPrefix(files, prefix) {
			name, rest, ok := strings.Cut(strings.TrimPrefix(p, prefix), "/")
			if !ok || strings.HasPrefix(name, ".") {
				continue
			}
			sk := byName[name]
			if sk == nil {
				sk = &penguinv1.SkillInfo{Name: name, Enabled: enabled}
				byName[name] = sk
			}
			sk.Files++
			sk.Bytes += int64(len(files[p].Data))
			if rest == agentstate.SkillFile {
				if parsed, err := agentstate.ParseSkill(p, name, files[p].Data); err == nil {
					sk.Description = parsed.Description
				}
			}
		}
		for _, name := range slices.Sorted(maps.Keys(byName)) {
			resp.Skills = append(resp.Skills, byName[name])
		}
	}
	return resp, nil
}

// InstallSkill implements AgentService. The skill is checked whole before
// anything is written: its bounds, its paths (no link, nothing outside
// the skill) and its SKILL.md, whose front matter must name it and say
// when it applies.
func (s *Server) InstallSkill(ctx context.Context, req *penguinv1.InstallSkillRequest) (*penguinv1.InstallSkillResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	var files []store.AgentFile
	switch src := req.GetSource().(type) {
	case *penguinv1.InstallSkillRequest_Archive:
		if files, err = unpackTar(src.Archive, skillLimits, "archive"); err != nil {
			return nil, err
		}
	case *penguinv1.InstallSkillRequest_ServerDir:
		dir, err := s.libraryDir(src.ServerDir)
		if err != nil {
			return nil, err
		}
		if files, err = readDir(dir, skillLimits, "server_dir"); err != nil {
			return nil, err
		}
	default:
		return nil, invalid("source", "give an archive or a server_dir")
	}
	files = stripTop(files, agentstate.SkillFile)
	var skillMD []byte
	for _, f := range files {
		if f.Path == agentstate.SkillFile {
			skillMD = f.Data
		}
	}
	if skillMD == nil {
		return nil, invalid("source", "no %s at the skill's top", agentstate.SkillFile)
	}
	if !strings.HasPrefix(strings.TrimPrefix(string(skillMD), "\ufeff"), "---") {
		return nil, invalid("source", "%s has no front matter (a --- block with name and description)", agentstate.SkillFile)
	}
	sk, err := agentstate.ParseSkill(agentstate.SkillFile, "", skillMD)
	if err != nil {
		return nil, invalid("source", "%v", err)
	}
	if sk.Name == "" || strings.TrimSpace(sk.Description) == "" {
		return nil, invalid("source", "the front matter of %s needs a name and a description", agentstate.SkillFile)
	}
	if err := agentmirror.ValidName(sk.Name); err != nil {
		return nil, invalid("source", "the skill's name: %v", err)
	}
	_, existing, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	var changes []store.AgentChange
	for _, enabled := range []bool{true, false} {
		for _, p := range underPrefix(existing, skillDir(sk.Name, enabled)+"/") {
			if !req.GetReplace() {
				return nil, status.Errorf(codes.AlreadyExists, "skill %s is installed; set replace to replace it", sk.Name)
			}
			changes = append(changes, store.AgentChange{Path: p, Delete: true, IfVersion: existing[p].Version})
		}
	}
	dir := skillDir(sk.Name, true)
	for _, f := range prefixed(dir, files) {
		if i := slices.IndexFunc(changes, func(c store.AgentChange) bool { return c.Path == f.Path }); i >= 0 {
			changes[i] = store.AgentChange{Path: f.Path, Data: f.Data, IfVersion: existing[f.Path].Version}
			continue
		}
		changes = append(changes, store.AgentChange{Path: f.Path, Data: f.Data, IfVersion: store.Absent})
	}
	if _, err := s.change(ctx, t, "install skill "+sk.Name, changes); err != nil {
		return nil, err
	}
	return &penguinv1.InstallSkillResponse{Skill: &penguinv1.SkillInfo{
		Name: sk.Name, Description: sk.Description, Enabled: true, Files: int32(len(files)), Bytes: sizeOf(files),
	}}, nil
}

// libraryDir resolves server_dir inside the skill library: a skill on the
// engine's host is read only from there, so that the API cannot read any
// other file of the host.
func (s *Server) libraryDir(name string) (string, error) {
	if s.opts.SkillLibrary == "" {
		return "", status.Error(codes.FailedPrecondition, "server_dir: this engine has no skill library directory")
	}
	lib, err := filepath.Abs(s.opts.SkillLibrary)
	if err != nil {
		return "", status.Errorf(codes.Internal, "skill library: %v", err)
	}
	dir := name
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(lib, dir)
	}
	dir = filepath.Clean(dir)
	rel, err := filepath.Rel(lib, dir)
	if err != nil || rel == "." || strings.HasPrefix(rel, "..") {
		return "", invalid("server_dir", "%s is not a directory inside the skill library %s", name, lib)
	}
	if real, err := filepath.EvalSymlinks(dir); err != nil || real != dir {
		return "", invalid("server_dir", "%s does not exist or passes through a symbolic link", name)
	}
	return dir, nil
}

// SetSkillEnabled implements AgentService: the skill's files move between
// skills/<name> and skills/.disabled/<name>.
func (s *Server) SetSkillEnabled(ctx context.Context, req *penguinv1.SetSkillEnabledRequest) (*penguinv1.SetSkillEnabledResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := agentmirror.ValidName(req.GetName()); err != nil {
		return nil, invalid("name", "%v", err)
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	from, to := skillDir(req.GetName(), !req.GetEnabled()), skillDir(req.GetName(), req.GetEnabled())
	paths := underPrefix(files, from+"/")
	if len(paths) == 0 {
		if len(underPrefix(files, to+"/")) > 0 {
			return &penguinv1.SetSkillEnabledResponse{}, nil
		}
		return nil, status.Errorf(codes.NotFound, "the agent has no skill %q", req.GetName())
	}
	var changes []store.AgentChange
	for _, p := range paths {
		changes = append(changes,
			store.AgentChange{Path: p, Delete: true, IfVersion: files[p].Version},
			store.AgentChange{Path: path.Join(to, strings.TrimPrefix(p, from+"/")), Data: files[p].Data, IfVersion: store.Absent})
	}
	if _, err := s.change(ctx, t, "skill "+req.GetName()+" enabled="+boolWord(req.GetEnabled()), changes); err != nil {
		return nil, err
	}
	return &penguinv1.SetSkillEnabledResponse{}, nil
}

// UninstallSkill implements AgentService.
func (s *Server) UninstallSkill(ctx context.Context, req *penguinv1.UninstallSkillRequest) (*penguinv1.UninstallSkillResponse, error) {
	t, err := s.targetOf(ctx, req, access.Write)
	if err != nil {
		return nil, err
	}
	if err := agentmirror.ValidName(req.GetName()); err != nil {
		return nil, invalid("name", "%v", err)
	}
	_, files, err := s.files(ctx, t)
	if err != nil {
		return nil, err
	}
	var changes []store.AgentChange
	for _, enabled := range []bool{true, false} {
		for _, p := range underPrefix(files, skillDir(req.GetName(), enabled)+"/") {
			changes = append(changes, store.AgentChange{Path: p, Delete: true, IfVersion: files[p].Version})
		}
	}
	if len(changes) == 0 {
		return nil, status.Errorf(codes.NotFound, "the agent has no skill %q", req.GetName())
	}
	if _, err := s.change(ctx, t, "uninstall skill "+req.GetName(), changes); err != nil {
		return nil, err
	}
	return &penguinv1.UninstallSkillResponse{}, nil
}

func boolWord(b bool) string {
	if b {
		return "true"
	}
	return "false"
}
