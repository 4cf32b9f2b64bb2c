package agentapi

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/penguin-agent/penguin/services/engine/agentmirror"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// Bounds of what an upload may hold, so that no archive can fill the
// store or the engine's memory. A compressed archive travels in one gRPC
// message, which the engine's services accept up to 4 MiB.
type limits struct {
	// archive is the largest compressed archive; total and file bound the
	// unpacked bytes, files their number.
	archive, total, file int64
	files                int
}

var (
	// agentLimits bound an agent's snapshot.
	agentLimits = limits{archive: 3 << 20, total: 64 << 20, file: 16 << 20, files: 5000}
	// skillLimits bound one skill.
	skillLimits = limits{archive: 2 << 20, total: 16 << 20, file: 4 << 20, files: 500}
)

// packTar writes files into a tar.gz, sorted by path, with fixed times and
// modes (0600 for a vault), so that the same files always make the same
// archive.
func packTar(files []store.AgentFile) ([]byte, error) {
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	sorted := slices.Clone(files)
	slices.SortFunc(sorted, func(a, b store.AgentFile) int { return strings.Compare(a.Path, b.Path) })
	for _, f := range sorted {
		mode := int64(0o644)
		if agentmirror.IsVault(f.Path) {
			mode = 0o600
		}
		hdr := &tar.Header{Name: f.Path, Mode: mode, Size: int64(len(f.Data)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// unpackTar reads a tar.gz into files, refusing anything but regular files
// and directories (a symbolic or hard link, a device), a path that leaves
// the archive (absolute, or with ".."), and anything beyond lim. field
// names the request's field in errors.
func unpackTar(data []byte, lim limits, field string) ([]store.AgentFile, error) {
	if int64(len(data)) > lim.archive {
		return nil, invalid(field, "the archive is %d bytes; at most %d are accepted", len(data), lim.archive)
	}
	gz, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, invalid(field, "not a gzip-compressed tar archive: %v", err)
	}
	tr := tar.NewReader(gz)
	var files []store.AgentFile
	seen := map[string]bool{}
	var total int64
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, invalid(field, "a damaged archive: %v", err)
		}
		name := strings.TrimPrefix(hdr.Name, "./")
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := agentmirror.CheckPath(strings.TrimSuffix(name, "/")); err != nil && name != "" && name != "./" {
				return nil, invalid(field, "the archive holds %v", err)
			}
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			return nil, invalid(field, "%s is a link (to %s); an archive may hold only files and directories", hdr.Name, hdr.Linkname)
		case tar.TypeXGlobalHeader:
			continue
		default:
			return nil, invalid(field, "%s is not a regular file; an archive may hold only files and directories", hdr.Name)
		}
		if err := agentmirror.CheckPath(name); err != nil {
			return nil, invalid(field, "the archive holds %v", err)
		}
		if seen[name] {
			return nil, invalid(field, "%s is in the archive twice", name)
		}
		seen[name] = true
		if len(files) >= lim.files {
			return nil, invalid(field, "more than %d files", lim.files)
		}
		if hdr.Size > lim.file {
			return nil, invalid(field, "%s is %d bytes; a file may have at most %d", name, hdr.Size, lim.file)
		}
		total += hdr.Size
		if total > lim.total {
			return nil, invalid(field, "the files add up to more than %d bytes", lim.total)
		}
		body, err := io.ReadAll(io.LimitReader(tr, lim.file+1))
		if err != nil {
			return nil, invalid(field, "a damaged archive: %v", err)
		}
		files = append(files, store.AgentFile{Path: name, Data: body})
	}
	return files, nil
}

// stripTop removes one directory every path starts with, when the files
// hold no marker at their top: an archive of "my-skill/SKILL.md", or of
// PenguinHarness's "agent_state/system_config.yaml".
func stripTop(files []store.AgentFile, marker string) []store.AgentFile {
	if len(files) == 0 || slices.ContainsFunc(files, func(f store.AgentFile) bool { return f.Path == marker }) {
		return files
	}
	top, _, ok := strings.Cut(files[0].Path, "/")
	if !ok {
		return files
	}
	for _, f := range files {
		if !strings.HasPrefix(f.Path, top+"/") {
			return files
		}
	}
	out := make([]store.AgentFile, len(files))
	for i, f := range files {
		out[i] = store.AgentFile{Path: strings.TrimPrefix(f.Path, top+"/"), Data: f.Data}
	}
	return out
}

// readDir reads a directory on the engine's host into files, refusing a
// symbolic link or any other non-regular file, and anything beyond lim.
func readDir(dir string, lim limits, field string) ([]store.AgentFile, error) {
	var files []store.AgentFile
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir():
			return nil
		case d.Type()&fs.ModeSymlink != 0:
			return invalid(field, "%s is a symbolic link; a skill may hold only files and directories", rel)
		case !d.Type().IsRegular():
			return invalid(field, "%s is not a regular file", rel)
		}
		if err := agentmirror.CheckPath(rel); err != nil {
			return invalid(field, "%v", err)
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if len(files) >= lim.files {
			return invalid(field, "more than %d files", lim.files)
		}
		if total += info.Size(); info.Size() > lim.file || total > lim.total {
			return invalid(field, "%s makes the files larger than accepted (%d bytes a file, %d in all)", rel, lim.file, lim.total)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files = append(files, store.AgentFile{Path: rel, Data: data})
		return nil
	})
	if err != nil {
		if _, ok := asStatus(err); ok {
			return nil, err
		}
		return nil, invalid(field, "%v", err)
	}
	return files, nil
}

// prefixed returns files moved under dir.
func prefixed(dir string, files []store.AgentFile) []store.AgentFile {
	out := make([]store.AgentFile, len(files))
	for i, f := range files {
		out[i] = store.AgentFile{Path: path.Join(dir, f.Path), Data: f.Data}
	}
	return out
}

func sizeOf(files []store.AgentFile) (n int64) {
	for _, f := range files {
		n += int64(len(f.Data))
	}
	return n
}

var _ = fmt.Sprintf
