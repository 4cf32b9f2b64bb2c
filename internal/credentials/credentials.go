// Package credentials keeps the credentials `penguin login` stores for
// the servers a user signs in to: one file in the user's configuration
// directory (credentials.json under penguin/ in os.UserConfigDir, which
// is ~/.config on Linux), mapping a server's address to its secret.
//
// The file holds bearer credentials, so it is created readable and
// writable by its owner alone (0600, in a 0700 directory), and rewritten
// whole through a temporary file and a rename, so that a crash never
// leaves half a file. A file that others may read is refused rather than
// used, as ssh does with a private key.
package credentials

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Entry is what is kept for one server.
type Entry struct {
	// Secret is the bearer credential: a login session's secret
	// (pgn_ses_…) or a personal access token (pgn_pat_…).
	Secret string `json:"secret"`
	// User is who it signs in as, for `penguin whoami` without a call.
	User string `json:"user,omitempty"`
	// ExpiresAt is when the credential ends, when known.
	ExpiresAt time.Time `json:"expires_at,omitzero"`
}

// File is the credentials file. The zero value is not usable; use
// [Default] or [At].
type File struct {
	path string
}

// At returns the credentials file at path.
func At(path string) File { return File{path: path} }

// Default returns the user's credentials file.
func Default() (File, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return File{}, fmt.Errorf("find the configuration directory for credentials: %w", err)
	}
	return At(filepath.Join(dir, "penguin", "credentials.json")), nil
}

// Path returns where the file is.
func (f File) Path() string { return f.path }

// read returns the file's entries; a missing file has none.
func (f File) read() (map[string]Entry, error) {
	fi, err := os.Stat(f.path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]Entry{}, nil
	}
	if err != nil {
		return nil, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%s may be read by others (mode %v); run chmod 600 on it, or remove it and sign in again", f.path, fi.Mode().Perm())
	}
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, err
	}
	m := map[string]Entry{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s is not a credentials file: %w", f.path, err)
	}
	return m, nil
}

// write replaces the file with m.
func (f File) write(m map[string]Entry) error {
	if err := os.MkdirAll(filepath.Dir(f.path), 0o700); err != nil {
		return err
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(f.path), ".credentials-*")
	if err != nil {
		return err
	}
	defer func() { _ = os.Remove(tmp.Name()) }()
	// CreateTemp makes the file 0600 already; Chmod says so for umasks
	// and systems where it differs.
	if err := tmp.Chmod(0o600); err != nil {
		_ = tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), f.path)
}

// Get returns the entry of server, and whether there is one.
func (f File) Get(server string) (Entry, bool, error) {
	m, err := f.read()
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := m[server]
	return e, ok, nil
}

// Put keeps e for server, replacing what was kept.
func (f File) Put(server string, e Entry) error {
	m, err := f.read()
	if err != nil {
		return err
	}
	m[server] = e
	return f.write(m)
}

// Delete forgets server's entry; forgetting a server with none is no
// error.
func (f File) Delete(server string) error {
	m, err := f.read()
	if err != nil {
		return err
	}
	if _, ok := m[server]; !ok {
		return nil
	}
	delete(m, server)
	return f.write(m)
}
