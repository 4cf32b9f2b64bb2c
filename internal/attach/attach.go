// Package attach holds what may be attached to a prompt, in one place for
// every surface: the engine checks a Run's images against it, the clients
// read their files through it (penguin run --image, /image in penguin
// chat), the web app learns the limits from GetSessionDefaults, and the
// environment's read_image tool takes the same images.
//
// Images go to the model as data URLs (or web URLs) in RunRequest.images.
// Other files are not uploaded anywhere: a client puts a text file's
// content into the prompt, fenced and named (see FileText), and refuses a
// binary one, so nothing reaches the workspace that the person did not
// write there themselves.
package attach

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode/utf8"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

const (
	// MaxImageBytes is the largest image, decoded: what the providers
	// take (Anthropic's limit is 5 MB an image).
	MaxImageBytes = 5 << 20
	// MaxImages is the most images one prompt carries. Eight of the
	// largest stay well inside the services' 64 MiB message limit once
	// base64 grows them by a third.
	MaxImages = 8
	// MaxFileBytes is the largest text file put into a prompt: about
	// 64,000 tokens, a third of the smaller context windows.
	MaxFileBytes = 256 << 10
)

// ImageTypes are the image types every provider with vision takes.
var ImageTypes = []string{"image/png", "image/jpeg", "image/gif", "image/webp"}

// Limits are the limits as GetSessionDefaults reports them.
func Limits() *penguinv1.AttachmentLimits {
	return &penguinv1.AttachmentLimits{
		MaxImageBytes: MaxImageBytes, MaxImages: MaxImages, ImageTypes: slices.Clone(ImageTypes), MaxFileBytes: MaxFileBytes,
	}
}

// CheckImages refuses a prompt's images unless each is an http(s) URL or
// a base64 data URL of an image type the providers take, of at most
// MaxImageBytes, and there are at most MaxImages. The error names the
// image (1-based) and what is wrong with it.
func CheckImages(images []string) error {
	if len(images) > MaxImages {
		return fmt.Errorf("%d images attached; a message takes at most %d", len(images), MaxImages)
	}
	for i, img := range images {
		if err := checkImage(img); err != nil {
			return fmt.Errorf("image %d: %w", i+1, err)
		}
	}
	return nil
}

func checkImage(img string) error {
	if strings.HasPrefix(img, "http://") || strings.HasPrefix(img, "https://") {
		return nil
	}
	rest, ok := strings.CutPrefix(img, "data:")
	if !ok {
		return fmt.Errorf("want an http(s) URL or a data URL (data:image/png;base64,…), not %q", clip(img))
	}
	mime, data, ok := strings.Cut(rest, ";base64,")
	if !ok {
		return fmt.Errorf("the data URL is not base64 (want data:<type>;base64,<data>)")
	}
	if !slices.Contains(ImageTypes, mime) {
		return fmt.Errorf("%q is not an image type the models take (%s)", clip(mime), strings.Join(ImageTypes, ", "))
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		return fmt.Errorf("the data URL's base64 does not decode: %v", err)
	}
	if len(raw) > MaxImageBytes {
		return fmt.Errorf("the image is %d bytes; at most %d (%s) are accepted", len(raw), MaxImageBytes, Size(MaxImageBytes))
	}
	if got := http.DetectContentType(raw); got != mime {
		return fmt.Errorf("the data URL says %s but the bytes are %s", mime, got)
	}
	return nil
}

// ImageFile reads the image at path into a data URL, refusing a file that
// is too large or not an image type the models take.
func ImageFile(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	if !st.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	if st.Size() > MaxImageBytes {
		return "", fmt.Errorf("%s is %s; an attached image may be at most %s", path, Size(st.Size()), Size(MaxImageBytes))
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	mime := http.DetectContentType(data)
	if !slices.Contains(ImageTypes, mime) {
		return "", fmt.Errorf("%s is %s, not a PNG, JPEG, GIF or WebP image", path, mime)
	}
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(data), nil
}

// FileText is how a text file goes into a prompt: its name, then its
// content in a fence longer than any run of backticks inside it. It
// refuses content that is not UTF-8 text or is larger than MaxFileBytes.
// The web app builds the same block (web/src/attach.ts).
func FileText(name string, data []byte) (string, error) {
	if len(data) > MaxFileBytes {
		return "", fmt.Errorf("%s is %s; an attached file may be at most %s", name, Size(int64(len(data))), Size(MaxFileBytes))
	}
	if !utf8.Valid(data) || slices.Contains(data, 0) {
		return "", fmt.Errorf("%s is not text; only images and text files can be attached", name)
	}
	fence := "```"
	for strings.Contains(string(data), fence) {
		fence += "`"
	}
	body := strings.TrimSuffix(string(data), "\n")
	return "Attached file " + filepath.Base(name) + ":\n" + fence + "\n" + body + "\n" + fence, nil
}

// Size writes n bytes for a person: 5 MiB, 256 KiB, 900 B.
func Size(n int64) string {
	switch {
	case n >= 1<<20:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<20))) + " MiB"
	case n >= 1<<10:
		return trimZero(fmt.Sprintf("%.1f", float64(n)/(1<<10))) + " KiB"
	}
	return fmt.Sprintf("%d B", n)
}

func trimZero(s string) string { return strings.TrimSuffix(s, ".0") }

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
