package scratchpad

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestPadStaysInside: names that would leave the scratchpad, hidden or
// nested ones, writes of images and oversized text are refused; a link
// planted inside leads nowhere outside.
func TestPadStaysInside(t *testing.T) {
	dir := t.TempDir()
	p := For(dir, "session-1")
	if err := p.Write("PLAN.md", "step one"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../x.md", "a/b.md", ".hidden", "", "..", strings.Repeat("a", 97)} {
		if err := p.Write(name, "x"); !errors.Is(err, ErrRefused) {
			t.Errorf("Write(%q) = %v, want refused", name, err)
		}
	}
	if err := p.Write("shot.png", "x"); !errors.Is(err, ErrRefused) {
		t.Errorf("writing an image: %v", err)
	}
	if err := p.Write("big.md", strings.Repeat("x", MaxTextBytes+1)); !errors.Is(err, ErrRefused) {
		t.Errorf("an oversized file: %v", err)
	}
	secret := filepath.Join(dir, "secret.txt")
	if err := os.WriteFile(secret, []byte("s3cret"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, Dir, "session-1", "link.md")); err != nil {
		t.Fatal(err)
	}
	if text, _, err := p.Read("link.md"); err == nil || strings.Contains(text, "s3cret") {
		t.Errorf("a link out was followed: %q, %v", text, err)
	}
	if _, err := For(dir, "session-2").ReadFile("PLAN.md"); err == nil {
		t.Error("another session's scratchpad read this one's file")
	}
	if name, ok := Name("scratchpad/GOAL.yaml"); !ok || name != "GOAL.yaml" {
		t.Errorf("Name = %q, %v", name, ok)
	}
	if _, ok := Name("memory/user/x.md"); ok {
		t.Error("a memory path named the scratchpad")
	}
}

func TestSaveImage(t *testing.T) {
	p := For(t.TempDir(), "s")
	png := "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
	name, err := p.SaveImage("goal-image-1", png)
	if err != nil || name != "goal-image-1.png" {
		t.Fatalf("SaveImage = %q, %v", name, err)
	}
	text, image, err := p.Read(name)
	if err != nil || image != png || !strings.Contains(text, "image/png") {
		t.Fatalf("Read = %q, %q, %v", text, image, err)
	}
	for _, bad := range []string{"data:text/html;base64,PGI+", "data:image/png,raw", "data:image/png;base64,!!!"} {
		if _, err := p.SaveImage("x", bad); !errors.Is(err, ErrRefused) {
			t.Errorf("SaveImage(%q) = %v, want refused", bad, err)
		}
	}
}
