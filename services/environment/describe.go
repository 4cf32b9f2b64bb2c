package environment

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// InstructionsFile is the name of a workspace's instruction files, the
// convention codex and opencode read too.
const InstructionsFile = "AGENTS.md"

// MaxInstructionsBytes bounds the AGENTS.md text DescribeWorkspace returns
// for one workspace, all files together: it goes into every request's
// system prompt, so a huge file must not crowd out the conversation (codex
// uses the same 32 KiB).
const MaxInstructionsBytes = 32 << 10

// DescribeWorkspace implements penguinv1.EnvironmentServiceServer. It
// reads beneath an os.Root handle on the service's root, so a link (or a
// directory swapped for one meanwhile) cannot take a read outside it.
func (s *Service) DescribeWorkspace(ctx context.Context, req *penguinv1.DescribeWorkspaceRequest) (*penguinv1.DescribeWorkspaceResponse, error) {
	real, err := s.existingWorkspace(req.GetWorkspace())
	if err != nil {
		return nil, err
	}
	root, err := os.OpenRoot(s.root)
	if err != nil {
		s.log.Error("opening the service root failed", "error", err)
		return nil, status.Error(codes.Internal, "the service root cannot be opened; see the service log")
	}
	defer root.Close()
	rel, err := filepath.Rel(s.root, real)
	if err != nil {
		return nil, toStatus(err)
	}
	// dirs runs from the service root down to the workspace, relative to
	// the root.
	dirs := []string{"."}
	if rel != "." {
		parts := strings.Split(rel, string(filepath.Separator))
		for i := range parts {
			dirs = append(dirs, filepath.Join(parts[:i+1]...))
		}
	}
	top := 0
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := root.Lstat(filepath.Join(dirs[i], ".git")); err == nil {
			top = i
			break
		}
	}
	resp := &penguinv1.DescribeWorkspaceResponse{Workspace: real, ProjectRoot: filepath.Join(s.root, dirs[top]), HostLimitations: s.opts.HostLimitations}
	budget := MaxInstructionsBytes
	for _, d := range dirs[top:] {
		name := filepath.Join(d, InstructionsFile)
		text, cut, err := readBounded(root, name, budget)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			s.log.Warn("a workspace instruction file cannot be read; it is left out", "file", filepath.Join(s.root, name), "error", err)
			continue
		}
		budget -= len(text)
		// The files after the bound are still named, with no content,
		// so the reader knows what it does not see.
		resp.AgentsFiles = append(resp.AgentsFiles, &penguinv1.InstructionFile{Path: filepath.Join(s.root, name), Content: text, Truncated: cut})
	}
	return resp, nil
}

// readBounded reads up to limit bytes of a regular file beneath root,
// cut back to whole UTF-8 characters, and tells whether the file held
// more.
func readBounded(root *os.Root, name string, limit int) (string, bool, error) {
	f, err := root.Open(name)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", false, err
	}
	if !info.Mode().IsRegular() {
		return "", false, errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return "", false, err
	}
	cut := len(data) > limit
	// Invalid sequences become U+FFFD, which may lengthen the text; the
	// bound holds for what is returned.
	text := strings.ToValidUTF8(string(data), "\uFFFD")
	if len(text) > limit {
		text = text[:limit]
		for len(text) > 0 {
			if r, size := utf8.DecodeLastRuneInString(text); r != utf8.RuneError || size > 1 {
				break
			}
			text = text[:len(text)-1]
		}
	}
	return text, cut, nil
}
