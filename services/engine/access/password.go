package access

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/crypto/argon2"
)

// Passwords are hashed with argon2id (golang.org/x/crypto/argon2), a
// memory-hard function, with the parameters OWASP recommends as a minimum
// (19 MiB, two passes, one lane), and kept in the PHC string format
// ("$argon2id$v=19$m=...,t=...,p=...$salt$hash"), so that stronger
// parameters later still verify the hashes made now.
const (
	argonMemory  = 19 * 1024 // KiB
	argonTime    = 2
	argonThreads = 1
	argonKeyLen  = 32
	saltLen      = 16

	// MinPasswordLength is the shortest password a user may choose.
	MinPasswordLength = 10
	// maxPasswordLength bounds the work a sign-in costs.
	maxPasswordLength = 1024
)

// CheckPassword reports what makes password unacceptable as a new one.
func CheckPassword(password string) error {
	switch n := utf8.RuneCountInString(password); {
	case n < MinPasswordLength:
		return fmt.Errorf("a password needs at least %d characters", MinPasswordLength)
	case len(password) > maxPasswordLength:
		return fmt.Errorf("a password has at most %d bytes", maxPasswordLength)
	}
	return nil
}

// HashPassword returns the encoded argon2id hash of password with a new
// random salt.
func HashPassword(password string) (string, error) {
	salt := make([]byte, saltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	key := argon2.IDKey([]byte(password), salt, argonTime, argonMemory, argonThreads, argonKeyLen)
	enc := base64.RawStdEncoding
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, argonMemory, argonTime, argonThreads,
		enc.EncodeToString(salt), enc.EncodeToString(key)), nil
}

var errBadHash = errors.New("not an argon2id hash")

// VerifyPassword reports whether password matches the encoded hash, in
// time that does not depend on where they differ. An empty or malformed
// hash matches nothing.
func VerifyPassword(encoded, password string) bool {
	ok, err := verify(encoded, password)
	return err == nil && ok
}

func verify(encoded, password string) (bool, error) {
	if len(password) > maxPasswordLength {
		return false, nil
	}
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, errBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, errBadHash
	}
	var (
		memory, time uint32
		threads      uint8
	)
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &memory, &time, &threads); err != nil || threads == 0 || time == 0 {
		return false, errBadHash
	}
	enc := base64.RawStdEncoding
	salt, err := enc.DecodeString(parts[4])
	if err != nil {
		return false, errBadHash
	}
	want, err := enc.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, errBadHash
	}
	got := argon2.IDKey([]byte(password), salt, time, memory, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyHash is verified against when a sign-in names no user, so that a
// wrong user id takes as long as a wrong password. It is made on first
// use: hashing costs a program that never signs anyone in 19 MiB.
var dummyHash = sync.OnceValue(func() string {
	h, err := HashPassword("no user has this password")
	if err != nil {
		panic(err)
	}
	return h
})

// newSecret returns prefix followed by 32 random bytes in base64url.
func newSecret(prefix string) string {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return prefix + base64.RawURLEncoding.EncodeToString(raw[:])
}
