package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/penguin-agent/penguin/internal/attach"
)

// Attachments are what the next message carries besides its text: images,
// sent to the model as data URLs, and text files, put into the prompt
// (see package attach). penguin run fills them from --image and --file,
// penguin chat from /image and /file.
type Attachments struct {
	Images []string
	files  []string
	names  []string
}

// AddImage reads the image at path, refusing one the engine would refuse.
func (a *Attachments) AddImage(path string) error {
	if len(a.Images) >= attach.MaxImages {
		return fmt.Errorf("a message takes at most %d images", attach.MaxImages)
	}
	url, err := attach.ImageFile(path)
	if err != nil {
		return err
	}
	a.Images = append(a.Images, url)
	a.names = append(a.names, filepath.Base(path))
	return nil
}

// AddFile reads the text file at path into the prompt.
func (a *Attachments) AddFile(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if st.Size() > attach.MaxFileBytes {
		return fmt.Errorf("%s is %s; an attached file may be at most %s", path, attach.Size(st.Size()), attach.Size(attach.MaxFileBytes))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	block, err := attach.FileText(path, data)
	if err != nil {
		return err
	}
	a.files = append(a.files, block)
	a.names = append(a.names, filepath.Base(path))
	return nil
}

// Empty says nothing is attached.
func (a *Attachments) Empty() bool { return len(a.names) == 0 }

// add appends what o holds.
func (a *Attachments) add(o Attachments) {
	a.Images = append(a.Images, o.Images...)
	a.files = append(a.files, o.files...)
	a.names = append(a.names, o.names...)
}

// Names are the attached files' names, in the order they were added.
func (a *Attachments) Names() []string { return a.names }

// Prompt is text followed by the attached text files.
func (a *Attachments) Prompt(text string) string {
	return strings.TrimSpace(strings.Join(append([]string{text}, a.files...), "\n\n"))
}

// expandHome reads a leading ~/ as the home directory, as a shell would:
// a path typed at the chat's prompt reaches no shell.
func expandHome(path string) string {
	rest, ok := strings.CutPrefix(path, "~/")
	if !ok {
		return path
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return path
	}
	return filepath.Join(home, rest)
}
