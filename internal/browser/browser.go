// Package browser opens a URL in the user's web browser, with the opener
// each desktop system provides: xdg-open on Linux and the BSDs, open on
// macOS, and url.dll's protocol handler on Windows. It is written here
// rather than taken from a library because it is one command per system,
// and the libraries that wrap it are no longer maintained.
package browser

import (
	"fmt"
	"net/url"
	"os/exec"
	"runtime"
)

// Command returns the program and arguments that open u on the system
// goos. Only http and https URLs are opened: an opener would run a file
// or another scheme's handler just as readily.
func Command(goos, u string) ([]string, error) {
	parsed, err := url.Parse(u)
	if err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" {
		return nil, fmt.Errorf("opening a browser: %q is not an http(s) URL", u)
	}
	switch goos {
	case "darwin":
		return []string{"open", u}, nil
	case "windows":
		return []string{"rundll32", "url.dll,FileProtocolHandler", u}, nil
	default:
		return []string{"xdg-open", u}, nil
	}
}

// Open opens u in the browser and returns once the opener has started;
// the opener is left to run (xdg-open may wait for the browser).
func Open(u string) error {
	argv, err := Command(runtime.GOOS, u)
	if err != nil {
		return err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("opening a browser with %s: %w", argv[0], err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
