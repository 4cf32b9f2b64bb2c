package agentstate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/penguin-agent/penguin/services/engine/agentconfig"
	"gopkg.in/yaml.v3"
)

// Skill is one installed skill: the metadata of skills/<dir>/SKILL.md. Only
// the name and description reach the system prompt; the model reads the
// file itself, with read_agent_file, when a task calls for it.
type Skill struct {
	// Name is the front matter's name, or the directory's name.
	Name string
	// Dir is the name of the skill's directory under skills/.
	Dir string
	// Description says when the skill applies.
	Description string
	// Path is the absolute path of SKILL.md.
	Path string
}

// skillFrontMatter is the part of a SKILL.md front matter Penguin reads;
// other keys (license, allowed-tools, …) are allowed and ignored.
type skillFrontMatter struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// loadSkills finds skills/<dir>/SKILL.md files, one level deep. A
// directory without SKILL.md is not a skill and is skipped; a SKILL.md
// whose front matter does not parse is an error naming the file and line.
func loadSkills(dir string) ([]Skill, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("agent state: %w", err)
	}
	var skills []Skill
	var errs []error
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if d, err := os.Stat(filepath.Join(dir, e.Name())); err != nil || !d.IsDir() {
			continue // a stray file, or a dangling link: not a skill
		}
		path := filepath.Join(dir, e.Name(), SkillFile)
		info, err := os.Stat(path) // follows a symlinked skill directory
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("agent state: %w", err))
			continue
		}
		if !info.Mode().IsRegular() {
			continue
		}
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("agent state: %w", err))
			continue
		}
		sk, err := parseSkill(path, e.Name(), data)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		skills = append(skills, sk)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	sort.Slice(skills, func(i, j int) bool { return skills[i].Name < skills[j].Name })
	for i := 1; i < len(skills); i++ {
		if skills[i].Name == skills[i-1].Name {
			return nil, &agentconfig.ConfigError{File: skills[i].Path, Field: "name",
				Msg: fmt.Sprintf("skill name %q is also used by %s", skills[i].Name, skills[i-1].Path)}
		}
	}
	return skills, nil
}

// parseSkill reads the front matter of a SKILL.md: a YAML block between a
// first line "---" and the next line "---". A file without front matter is
// a skill named after its directory, with no description.
// ParseSkill reads a SKILL.md's front matter as loading an agent does;
// path names the file in errors and dirName is its skill's directory.
func ParseSkill(path, dirName string, data []byte) (Skill, error) {
	return parseSkill(path, dirName, data)
}

func parseSkill(path, dirName string, data []byte) (Skill, error) {
	sk := Skill{Name: dirName, Dir: dirName, Path: path}
	text := strings.TrimPrefix(string(data), "\ufeff")
	text = strings.ReplaceAll(text, "\r\n", "\n")
	if !strings.HasPrefix(text, "---\n") {
		return sk, nil
	}
	body := text[len("---\n"):]
	end := -1
	for off := 0; off <= len(body); {
		nl := strings.IndexByte(body[off:], '\n')
		line := body[off:]
		if nl >= 0 {
			line = body[off : off+nl]
		}
		if strings.TrimRight(line, " \t") == "---" {
			end = off
			break
		}
		if nl < 0 {
			break
		}
		off += nl + 1
	}
	if end < 0 {
		return sk, &agentconfig.ConfigError{File: path, Line: 1, Msg: "the front matter opened by \"---\" is never closed"}
	}
	var fm skillFrontMatter
	if err := yaml.NewDecoder(bytes.NewReader([]byte(body[:end]))).Decode(&fm); err != nil && !errors.Is(err, io.EOF) {
		// The front matter starts on line 2 of the file.
		return sk, agentconfig.YAMLErrors(path, err, 1)
	}
	if n := strings.TrimSpace(fm.Name); n != "" {
		sk.Name = n
	}
	sk.Description = strings.Join(strings.Fields(fm.Description), " ")
	return sk, nil
}

// skillMetadata renders one line per skill for {{SKILL_METADATA}}, each
// with the path read_agent_file takes: the engine holds the skills, and a
// path on its disk would mean nothing to the environment's tools.
func skillMetadata(skills []Skill) string {
	if len(skills) == 0 {
		return "(no skills installed)"
	}
	var b strings.Builder
	for i, sk := range skills {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString("- ")
		b.WriteString(sk.Name)
		if sk.Description != "" {
			b.WriteString(": ")
			b.WriteString(sk.Description)
		}
		fmt.Fprintf(&b, " (%s/%s/%s)", SkillsDir, sk.Dir, SkillFile)
	}
	return b.String()
}
