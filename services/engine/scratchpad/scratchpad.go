// Package scratchpad is a session's scratchpad: a flat directory of files
// on the engine's side, <agent state>/scratchpad/<session id>/, as the
// reference lays it out. Goal mode keeps its control file (GOAL.yaml) and
// the images of an objective there; the model reaches it through the
// agent-file tools as scratchpad/<name>, and only its own session's.
//
// It lives beside the agent's state, on the volume engine replicas share,
// so a goal taken over by another replica finds its file; every access
// goes through an os.Root, so no name, link or ".." leads outside it.
package scratchpad

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"unicode/utf8"
)

// Dir is the agent-file path of the scratchpad.
const Dir = "scratchpad"

// Bounds of one session's scratchpad, so that a model in a loop cannot fill
// the engine's disk.
const (
	// MaxTextBytes is the largest file the model may write.
	MaxTextBytes = 256 << 10
	// MaxBytes and MaxFiles bound the scratchpad as a whole (the images
	// of an objective included).
	MaxBytes = 64 << 20
	MaxFiles = 64
)

// ErrRefused marks a request that names no scratchpad file or breaks a
// bound; its message is for the model.
var ErrRefused = errors.New("scratchpad")

func refuse(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrRefused, fmt.Sprintf(format, args...))
}

// fileName is what a scratchpad file may be called: plain, flat, not
// hidden (temporary files are).
var fileName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$`) })

// imageTypes are the extensions read back as images.
var imageTypes = map[string]string{".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".webp": "image/webp"}

// Pad is one session's scratchpad.
type Pad struct {
	dir string
}

// For returns the scratchpad of session under the agent state directory
// agentDir.
func For(agentDir, session string) *Pad {
	return &Pad{dir: filepath.Join(agentDir, Dir, session)}
}

// Path is the agent-file path of the file called name.
func Path(name string) string { return Dir + "/" + name }

// Name returns the file name an agent-file path names, and whether the
// path is in the scratchpad at all ("scratchpad" itself names it whole).
func Name(p string) (string, bool) {
	p = path.Clean(strings.TrimPrefix(strings.TrimSpace(p), "./"))
	if p == Dir {
		return "", true
	}
	name, ok := strings.CutPrefix(p, Dir+"/")
	return name, ok
}

func (p *Pad) root(create bool) (*os.Root, error) {
	if create {
		if err := os.MkdirAll(p.dir, 0o700); err != nil {
			return nil, fmt.Errorf("scratchpad: %w", err)
		}
	}
	r, err := os.OpenRoot(p.dir)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func checkName(name string) error {
	if !fileName().MatchString(name) {
		return refuse("%q is not a scratchpad file name: use a plain name such as PLAN.md, directly in scratchpad/", name)
	}
	return nil
}

// ReadFile returns a file's bytes; a missing file is fs.ErrNotExist.
func (p *Pad) ReadFile(name string) ([]byte, error) {
	if err := checkName(name); err != nil {
		return nil, err
	}
	r, err := p.root(false)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.ReadFile(name)
}

// WriteFile replaces (or creates) a file atomically, within the
// scratchpad's bounds.
func (p *Pad) WriteFile(name string, data []byte) error {
	if err := checkName(name); err != nil {
		return err
	}
	r, err := p.root(true)
	if err != nil {
		return err
	}
	defer r.Close()
	entries, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		return fmt.Errorf("scratchpad: %w", err)
	}
	files, total, replaced := 0, int64(len(data)), false
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		if e.Name() == name {
			replaced = true
			continue
		}
		files++
		total += info.Size()
	}
	if !replaced && files >= MaxFiles {
		return refuse("the scratchpad already holds %d files, the most it may; delete some first", files)
	}
	if total > MaxBytes {
		return refuse("the scratchpad would hold %d bytes, more than its bound of %d", total, MaxBytes)
	}
	tmp := ".tmp-" + name
	if err := r.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("scratchpad: %w", err)
	}
	if err := r.Rename(tmp, name); err != nil {
		_ = r.Remove(tmp)
		return fmt.Errorf("scratchpad: %w", err)
	}
	return nil
}

// SaveImage saves an image given as a data URL under name (its extension
// chosen from the image's type) and returns the file name used.
func (p *Pad) SaveImage(base, dataURL string) (string, error) {
	meta, payload, ok := strings.Cut(strings.TrimPrefix(dataURL, "data:"), ",")
	if !strings.HasPrefix(dataURL, "data:") || !ok || !strings.HasSuffix(meta, ";base64") {
		return "", refuse("the image is not a base64 data URL")
	}
	mt := strings.TrimSuffix(meta, ";base64")
	ext := ""
	for e, t := range imageTypes {
		if t == mt && (ext == "" || e < ext) {
			ext = e
		}
	}
	if ext == "" {
		return "", refuse("the image type %q is not one of png, jpeg, gif or webp", mt)
	}
	data, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return "", refuse("the image's base64 does not decode: %v", err)
	}
	name := base + ext
	return name, p.WriteFile(name, data)
}

// Remove deletes a file.
func (p *Pad) Remove(name string) error {
	if err := checkName(name); err != nil {
		return err
	}
	r, err := p.root(false)
	if err != nil {
		return err
	}
	defer r.Close()
	return r.Remove(name)
}

// RemoveAll deletes the whole scratchpad (the session is deleted).
func (p *Pad) RemoveAll() error { return os.RemoveAll(p.dir) }

// Read is read_agent_file on a scratchpad path: the listing for the
// scratchpad itself, a file's text, or an image as a data URL.
func (p *Pad) Read(name string) (text string, image string, err error) {
	if name == "" {
		return p.listing(), "", nil
	}
	data, err := p.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", "", refuse("%s does not exist", Path(name))
	}
	if err != nil {
		return "", "", err
	}
	if t, ok := imageTypes[strings.ToLower(filepath.Ext(name))]; ok {
		return fmt.Sprintf("%s (%s, %d bytes)", Path(name), t, len(data)), "data:" + t + ";base64," + base64.StdEncoding.EncodeToString(data), nil
	}
	if !utf8.Valid(data) {
		return "", "", refuse("%s is not text", Path(name))
	}
	return string(data), "", nil
}

// Write is write_agent_file on a scratchpad file.
func (p *Pad) Write(name, content string) error {
	if len(content) > MaxTextBytes {
		return refuse("%d bytes is more than a scratchpad file may hold (%d)", len(content), MaxTextBytes)
	}
	if !utf8.ValidString(content) {
		return refuse("the content is not valid UTF-8 text")
	}
	if _, ok := imageTypes[strings.ToLower(filepath.Ext(name))]; ok {
		return refuse("%s names an image; the scratchpad's images are written by the engine only", Path(name))
	}
	return p.WriteFile(name, []byte(content))
}

// Delete is delete_agent_file on a scratchpad file.
func (p *Pad) Delete(name string) error {
	err := p.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return refuse("%s does not exist", Path(name))
	}
	return err
}

func (p *Pad) listing() string {
	r, err := p.root(false)
	if err != nil {
		return "(the scratchpad is empty)"
	}
	defer r.Close()
	entries, err := fs.ReadDir(r.FS(), ".")
	if err != nil {
		return "(the scratchpad could not be listed)"
	}
	var b strings.Builder
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s (%d bytes)\n", Path(e.Name()), info.Size())
	}
	if b.Len() == 0 {
		return "(the scratchpad is empty)"
	}
	return strings.TrimSuffix(b.String(), "\n")
}
