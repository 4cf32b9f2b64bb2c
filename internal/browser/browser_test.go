package browser

import (
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCommand(t *testing.T) {
	const u = "http://127.0.0.1:7480/"
	for goos, want := range map[string][]string{
		"linux":   {"xdg-open", u},
		"freebsd": {"xdg-open", u},
		"darwin":  {"open", u},
		"windows": {"rundll32", "url.dll,FileProtocolHandler", u},
	} {
		got, err := Command(goos, u)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("Command(%s) = %q, %v; want %q", goos, got, err, want)
		}
	}
	for _, bad := range []string{"file:///etc/passwd", "javascript:alert(1)", "/tmp/x", "http://", "calc.exe"} {
		if _, err := Command("windows", bad); err == nil {
			t.Errorf("Command(%q) was accepted", bad)
		}
	}
}

// TestOpenRunsTheOpener puts a fake xdg-open first on PATH and checks that
// Open starts it with the URL.
func TestOpenRunsTheOpener(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip()
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "opened")
	script := "#!/bin/sh\nprintf '%s' \"$1\" > " + out + "\n"
	for _, name := range []string{"xdg-open", "open"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", dir)
	if err := Open("http://127.0.0.1:7480/"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(out)
		if err == nil && strings.TrimSpace(string(b)) == "http://127.0.0.1:7480/" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the opener did not get the URL: %q, %v", b, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
