package session

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/penguin-agent/penguin/services/engine/agentstate"
	"github.com/penguin-agent/penguin/services/engine/loop"
)

// skillName is what a skill's directory name may be (the only names the
// agent API installs, and those of imported agent directories).
var skillName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9_-]+$`) })

// checkSkillNames checks the names a task asks for before anything is
// claimed: each must be a skill directory name, given once.
func checkSkillNames(names []string) error {
	seen := make(map[string]bool, len(names))
	for i, n := range names {
		switch {
		case !skillName().MatchString(n):
			return fmt.Errorf("%w: skills[%d]: %q is not a skill name (letters, digits, '-' and '_')", ErrInvalid, i, n)
		case seen[n]:
			return fmt.Errorf("%w: skills[%d]: %q is named twice", ErrInvalid, i, n)
		}
		seen[n] = true
	}
	return nil
}

// checkSkillsInstalled checks that every named skill is installed and
// enabled on the task's agent. A name the model could not find would
// make it guess, so a wrong one is the caller's error, not dropped.
func checkSkillsInstalled(st *agentstate.State, names []string) error {
	for i, n := range names {
		if installedSkill(st, n) {
			continue
		}
		_, err := os.Stat(filepath.Join(st.Dir, agentstate.SkillsDir, agentstate.DisabledSkillsDir, n, agentstate.SkillFile))
		if err == nil {
			return fmt.Errorf("%w: skills[%d]: skill %q is disabled on this session's agent; enable it first", ErrInvalid, i, n)
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("skills[%d]: %w", i, err)
		}
		var have []string
		for _, sk := range st.Skills {
			have = append(have, sk.Dir)
		}
		list := "none is"
		if len(have) > 0 {
			list = strings.Join(have, ", ") + " are"
		}
		return fmt.Errorf("%w: skills[%d]: no skill %q is installed on this session's agent (%s)", ErrInvalid, i, n, list)
	}
	return nil
}

// installedSkill reports whether st has an enabled skill in directory n.
func installedSkill(st *agentstate.State, n string) bool {
	for _, sk := range st.Skills {
		if sk.Dir == n {
			return true
		}
	}
	return false
}

// withSkills prefixes text with the [use_skills] block naming the skills,
// in the format imported agent directories use: "skills: a, b" inside the block, a blank
// line, then the message; the block alone when there is no message.
func withSkills(names []string, text string) string {
	if len(names) == 0 {
		return text
	}
	block := loop.Block("use_skills", "skills: "+strings.Join(names, ", "))
	if strings.TrimSpace(text) == "" {
		return block
	}
	return block + "\n\n" + text
}
