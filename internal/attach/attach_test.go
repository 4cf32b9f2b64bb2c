package attach

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// png is the smallest header http.DetectContentType reads as a PNG.
var png = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")

func dataURL(mime string, b []byte) string {
	return "data:" + mime + ";base64," + base64.StdEncoding.EncodeToString(b)
}

func TestCheckImages(t *testing.T) {
	ok := dataURL("image/png", png)
	if err := CheckImages([]string{ok, "https://example.org/a.png"}); err != nil {
		t.Fatal(err)
	}
	big := dataURL("image/png", append(png, bytes.Repeat([]byte{0}, MaxImageBytes)...))
	for _, c := range []struct {
		images []string
		want   string
	}{
		{[]string{ok, "file:///etc/passwd"}, "image 2: want an http(s) URL or a data URL"},
		{[]string{"data:image/png,plain"}, "image 1: the data URL is not base64"},
		{[]string{dataURL("image/svg+xml", []byte("<svg/>"))}, `"image/svg+xml" is not an image type the models take`},
		{[]string{big}, "image 1: the image is 5242896 bytes; at most 5242880 (5 MiB) are accepted"},
		{[]string{"data:image/png;base64,!!!"}, "does not decode"},
		{[]string{dataURL("image/jpeg", png)}, "the data URL says image/jpeg but the bytes are image/png"},
		{strings.Split(strings.Repeat(ok+" ", MaxImages+1), " ")[:MaxImages+1], "9 images attached; a message takes at most 8"},
	} {
		err := CheckImages(c.images)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestImageFileAndFileText(t *testing.T) {
	dir := t.TempDir()
	img := filepath.Join(dir, "a.png")
	txt := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(img, png, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(txt, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	url, err := ImageFile(img)
	if err != nil || url != dataURL("image/png", png) {
		t.Fatalf("ImageFile = %q, %v", url, err)
	}
	if _, err := ImageFile(txt); err == nil || !strings.Contains(err.Error(), "not a PNG, JPEG, GIF or WebP image") {
		t.Errorf("a text file as an image: %v", err)
	}
	if _, err := ImageFile(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory as an image: %v", err)
	}
	got, err := FileText("dir/a.md", []byte("x\n```\ny\n"))
	if err != nil || got != "Attached file a.md:\n````\nx\n```\ny\n````" {
		t.Errorf("FileText = %q, %v", got, err)
	}
	if _, err := FileText("b.bin", []byte{0xff, 0}); err == nil || !strings.Contains(err.Error(), "b.bin is not text") {
		t.Errorf("binary: %v", err)
	}
	if _, err := FileText("big.txt", bytes.Repeat([]byte("a"), MaxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "at most 256 KiB") {
		t.Errorf("too big: %v", err)
	}
}
