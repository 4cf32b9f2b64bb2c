package routestore

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// MinSecret is the shortest secret a Sealer takes, in bytes: the output of
// `openssl rand -base64 32` and the like is longer.
const MinSecret = 32

// Sealer encrypts the routes' API keys with AES-256-GCM under a key
// derived (HKDF-SHA-256) from the operator's secret. The route's project
// and name are the additional data, so a sealed key copied onto another
// route of the table does not open there.
type Sealer struct {
	aead cipher.AEAD
	// id names the key, so that a key sealed under another secret is
	// reported as such rather than as a corrupt row.
	id string
}

// NewSealer returns the Sealer for secret, which must be at least
// MinSecret bytes (surrounding white space is ignored).
func NewSealer(secret []byte) (*Sealer, error) {
	secret = []byte(strings.TrimSpace(string(secret)))
	if len(secret) < MinSecret {
		return nil, fmt.Errorf("the route key secret has %d bytes; it needs at least %d (make one with: head -c 32 /dev/urandom | base64)", len(secret), MinSecret)
	}
	key, err := hkdf.Key(sha256.New, secret, nil, "penguin provider route api keys v1", 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(append([]byte("penguin route key id\x00"), key...))
	return &Sealer{aead: aead, id: hex.EncodeToString(sum[:8])}, nil
}

// LoadSecret reads the secret at path. When create is set and the file
// does not exist, it writes a new random secret there first (mode 0600),
// for a local server whose operator has not chosen one.
func LoadSecret(path string, create bool) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil || !create || !errors.Is(err, os.ErrNotExist) {
		return b, err
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	secret := []byte(hex.EncodeToString(raw[:]) + "\n")
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) { // another process made it first
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(secret); err != nil {
		f.Close()
		return nil, err
	}
	return secret, f.Close()
}

func aad(project, name string) []byte { return []byte(project + "\x00" + name) }

// seal encrypts key for the route project/name: a fresh nonce, then the
// ciphertext.
func (s *Sealer) seal(project, name, key string) []byte {
	nonce := make([]byte, s.aead.NonceSize(), s.aead.NonceSize()+len(key)+s.aead.Overhead())
	_, _ = rand.Read(nonce)
	return s.aead.Seal(nonce, nonce, []byte(key), aad(project, name))
}

// open decrypts what seal made for the route project/name under the key
// named id.
func (s *Sealer) open(project, name, id string, sealed []byte) (string, error) {
	if id != s.id {
		return "", fmt.Errorf("its key was encrypted under another route key secret (key id %s; this server's is %s)", id, s.id)
	}
	n := s.aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("its sealed key is truncated")
	}
	plain, err := s.aead.Open(nil, sealed[:n], sealed[n:], aad(project, name))
	if err != nil {
		return "", errors.New("its sealed key does not open: it was altered, or moved from another route")
	}
	return string(plain), nil
}

// Mask shows enough of key to recognise it and never the rest: its first
// characters (a vendor's prefix, such as "sk-ant-") and its last four.
func Mask(key string) string {
	switch {
	case key == "":
		return ""
	case len(key) < 16:
		return strings.Repeat("•", 4)
	}
	head := min(len(key)/6, 7)
	return key[:head] + "…" + key[len(key)-4:]
}
