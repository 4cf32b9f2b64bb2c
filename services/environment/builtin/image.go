package builtin

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/attach"
	"github.com/penguin-agent/penguin/services/environment/tool"
	"github.com/penguin-agent/penguin/services/environment/workspace"
)

// maxImageBytes is the largest image read_image accepts: the largest a
// prompt may carry, since both go to the same models.
const maxImageBytes = attach.MaxImageBytes

// readImage is read_image.
type readImage struct{ d Deps }

func (t *readImage) Permission() penguinv1.Permission { return permR }

func (t *readImage) Definition() *penguinv1.ToolDefinition { return readImageDef }

var readImageDef = def("read_image",
	"Look at an image: a PNG, JPEG, GIF or WebP file of at most 5 MB, from the workspace or an http(s) URL. The image is returned to you as image content.",
	`{"type":"object","properties":{`+
		`"source":{"type":"string","description":"An http(s) URL, or a file path inside the workspace."}`+
		`},"required":["source"]}`)

type imageArgs struct {
	Source string `json:"source"`
}

func (t *readImage) Run(ctx context.Context, raw string, out tool.Output) (tool.Result, error) {
	var a imageArgs
	if err := tool.DecodeArgs(raw, &a, "source"); err != nil {
		return tool.Result{}, err
	}
	var data []byte
	var err error
	if strings.HasPrefix(a.Source, "http://") || strings.HasPrefix(a.Source, "https://") {
		data, err = t.fetch(ctx, a.Source)
	} else {
		data, err = t.readLocal(a.Source)
	}
	if err != nil {
		return tool.Result{}, err
	}
	mime := http.DetectContentType(data)
	if !slices.Contains(attach.ImageTypes, mime) {
		return tool.Result{}, fmt.Errorf("%s is %s, not a PNG, JPEG, GIF or WebP image", a.Source, mime)
	}
	url := "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data)
	fmt.Fprintf(out, "Image %s (%s, %d bytes)", a.Source, mime, len(data))
	return tool.Result{Images: []string{url}}, nil
}

func (t *readImage) readLocal(source string) ([]byte, error) {
	tree, name, err := t.d.Root.Locate(source, false)
	if err != nil {
		return nil, err
	}
	data, err := tree.ReadFile(name, maxImageBytes)
	if errors.Is(err, workspace.ErrTooLarge) {
		return nil, fmt.Errorf("%s is larger than read_image accepts (at most %d bytes)", source, maxImageBytes)
	}
	if err != nil {
		return nil, fileError(source, err)
	}
	return data, nil
}

func (t *readImage) fetch(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %w", url, err)
	}
	resp, err := t.d.HTTP.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetching %s: HTTP %s", url, resp.Status)
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxImageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetching %s: %w", url, err)
	}
	if len(data) > maxImageBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes, the most read_image accepts", url, maxImageBytes)
	}
	return data, nil
}
