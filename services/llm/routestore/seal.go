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

	"github.com/penguin-agent/penguin/internal/newfile"
)

// MinSecret is the shortest secret a Sealer takes, in bytes: the output of
// `openssl rand -base64 32` and the like is longer.
const MinSecret = 32

// Sealer encrypts the routes' API keys with AES-256-GCM under a key
// derived (HKDF-SHA-256) from the operator's secret. The route's project
// and name are the additional data, so a sealed key copied onto another
// route of the table does not open there.
//
// A Sealer may also hold earlier secrets, which open the keys sealed
// under them but seal nothing: a key rotation puts the new secret first,
// and [Store.Reseal] then moves every stored key onto it.
type Sealer struct {
	aead cipher.AEAD
	// id names the key, so that a key sealed under another secret is
	// reported as such rather than as a corrupt row.
	id string
	// previous are the earlier secrets' ciphers, by id.
	previous map[string]cipher.AEAD
}

// NewSealer returns the Sealer for secrets: one secret per line, the
// first the one that seals, the others earlier ones that only open. Each
// must be at least MinSecret bytes (surrounding white space and empty
// lines are ignored).
func NewSealer(secrets []byte) (*Sealer, error) {
	var s *Sealer
	for i, line := range strings.Split(string(secrets), "\n") {
		secret := strings.TrimSpace(line)
		if secret == "" {
			continue
		}
		if len(secret) < MinSecret {
			return nil, fmt.Errorf("the route key secret on line %d has %d bytes; it needs at least %d (make one with: head -c 32 /dev/urandom | base64)", i+1, len(secret), MinSecret)
		}
		aead, id, err := cipherOf([]byte(secret))
		if err != nil {
			return nil, err
		}
		if s == nil {
			s = &Sealer{aead: aead, id: id, previous: map[string]cipher.AEAD{}}
		} else if id != s.id {
			s.previous[id] = aead
		}
	}
	if s == nil {
		return nil, fmt.Errorf("the route key secret is empty; it needs at least %d bytes (make one with: head -c 32 /dev/urandom | base64)", MinSecret)
	}
	return s, nil
}

// cipherOf derives the AES-256-GCM cipher of one secret and its key id.
func cipherOf(secret []byte) (cipher.AEAD, string, error) {
	key, err := hkdf.Key(sha256.New, secret, nil, "penguin provider route api keys v1", 32)
	if err != nil {
		return nil, "", err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, "", err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(append([]byte("penguin route key id\x00"), key...))
	return aead, hex.EncodeToString(sum[:8]), nil
}

// ID names the secret that seals, as the store records it beside each key.
func (s *Sealer) ID() string { return s.id }

// LoadSecret reads the secret at path. When create is set and the file
// does not exist, it makes it holding a new random secret (mode 0600,
// whole or not at all: package newfile), for a local server whose
// operator has not chosen one.
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
	// Whole or not at all: a secret cut short by a crash would leave the
	// routes sealed under it unopenable.
	err = newfile.Write(path, secret, 0o600)
	if errors.Is(err, os.ErrExist) { // another process made it first
		return os.ReadFile(path)
	}
	if err != nil {
		return nil, err
	}
	return secret, nil
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
// named id: the current secret's, or an earlier one's.
func (s *Sealer) open(project, name, id string, sealed []byte) (string, error) {
	aead := s.aead
	if id != s.id {
		if aead = s.previous[id]; aead == nil {
			return "", fmt.Errorf("its key was encrypted under another route key secret (key id %s; this server's is %s, and it holds no earlier secret of that id)", id, s.id)
		}
	}
	n := aead.NonceSize()
	if len(sealed) < n {
		return "", errors.New("its sealed key is truncated")
	}
	plain, err := aead.Open(nil, sealed[:n], sealed[n:], aad(project, name))
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
