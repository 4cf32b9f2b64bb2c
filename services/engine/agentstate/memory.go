package agentstate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Memory index limits: what reaches the prompt of one scope's MEMORY.md.
// The line cap is the one the memory prompt announces; the character cap
// is a backstop for a few enormous lines.
const (
	MemoryIndexMaxLines = 200
	MemoryIndexMaxChars = 25000
)

// Memory layout names.
const (
	MemoryIndexFile   = "MEMORY.md"
	memoryUserScope   = "user"
	memoryMarkerFile  = ".workspace"
	memoryKeyHashSize = 4 // bytes, printed as 8 hex digits
)

// UserMemoryDir is the directory of the memory that holds wherever the
// agent works.
func (s *State) UserMemoryDir() string { return filepath.Join(s.Dir, MemoryDir, memoryUserScope) }

// WorkspaceMemoryDir is the directory of the memory of one workspace.
func (s *State) WorkspaceMemoryDir(workspace string) string {
	return filepath.Join(s.Dir, MemoryDir, MemoryKey(workspace))
}

// MemoryKey names a workspace's memory directory:
// <safe base name>-<8 hex digits of the SHA-256 of its real path>. The
// directory itself is the identity: two symbolic links to one directory
// share a key, and a moved directory gets a new one. The key always holds
// a hyphen, so it never collides with the "user" scope.
func MemoryKey(workspace string) string {
	real := realPath(workspace)
	sum := sha256.Sum256([]byte(real))
	return safeBase(filepath.Base(real)) + "-" + hex.EncodeToString(sum[:memoryKeyHashSize])
}

// realPath resolves a workspace to an absolute path without symbolic
// links, as far as it exists.
func realPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		abs = filepath.Clean(p)
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}

func safeBase(name string) string {
	var b strings.Builder
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '.':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
		if b.Len() >= 40 {
			break
		}
	}
	s := strings.Trim(b.String(), "-.")
	if s == "" {
		return "workspace"
	}
	return s
}

// PrepareMemory creates the memory directories a session will use: the
// user scope always, and the workspace scope unless the workspace is a
// temporary one (no later session would ever read it back). The workspace
// directory records the path it stands for in a .workspace file. It does
// nothing when memory is disabled.
func (s *State) PrepareMemory(workspace string, temporary bool) error {
	if !s.Config.Memory.Enabled {
		return nil
	}
	if err := os.MkdirAll(s.UserMemoryDir(), 0o755); err != nil {
		return fmt.Errorf("agent state: memory: %w", err)
	}
	if temporary || workspace == "" {
		return nil
	}
	dir := s.WorkspaceMemoryDir(workspace)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("agent state: memory: %w", err)
	}
	marker := filepath.Join(dir, memoryMarkerFile)
	want := realPath(workspace) + "\n"
	if got, err := os.ReadFile(marker); err == nil && string(got) == want {
		return nil
	}
	if err := writeFileAtomic(marker, []byte(want), 0o644); err != nil {
		return fmt.Errorf("agent state: memory: %w", err)
	}
	return nil
}

// memoryIndex renders one scope's MEMORY.md for the prompt: an explicit
// note when nothing is saved, and a note pointing at the file when the
// index is cut at MemoryIndexMaxLines lines or MemoryIndexMaxChars
// characters. The file itself is never changed. shown is the scope's path
// for the agent-file tools, which the notes name.
func memoryIndex(dir, shown string) string {
	data, err := os.ReadFile(filepath.Join(dir, MemoryIndexFile))
	path := shown + "/" + MemoryIndexFile
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("(the memory index %s could not be read: %v)", path, errors.Unwrap(err))
	}
	text := strings.TrimRight(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n \t")
	if strings.TrimSpace(text) == "" {
		return "(nothing saved yet)"
	}
	truncated := false
	lines := strings.Split(text, "\n")
	if len(lines) > MemoryIndexMaxLines {
		lines = lines[:MemoryIndexMaxLines]
		truncated = true
	}
	text = strings.Join(lines, "\n")
	if r := []rune(text); len(r) > MemoryIndexMaxChars {
		text = string(r[:MemoryIndexMaxChars])
		if i := strings.LastIndexByte(text, '\n'); i > 0 {
			text = text[:i]
		}
		truncated = true
	}
	if truncated {
		text += fmt.Sprintf("\n[the index is longer than shown: read %s for the rest, and shorten it]", path)
	}
	return text
}
