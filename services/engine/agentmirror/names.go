package agentmirror

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// nameRe is what an agent may be called: a plain directory name on any
// filesystem, never hidden.
var nameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`) })

// ValidName reports whether name can name an agent.
func ValidName(name string) error {
	if !nameRe().MatchString(name) {
		return fmt.Errorf("invalid agent name %q: use 1 to 64 letters, digits, \".\", \"_\" and \"-\", starting with a letter or digit", name)
	}
	return nil
}

// MaxPathLength bounds a file's path inside an agent.
const MaxPathLength = 512

// CheckPath reports whether p can be the path of a file inside an agent:
// relative, slash-separated, with no empty, "." or ".." element, no
// backslash or NUL, and not the working copy's own sync record.
func CheckPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("an empty path")
	case len(p) > MaxPathLength:
		return fmt.Errorf("a path longer than %d bytes", MaxPathLength)
	case strings.HasPrefix(p, "/"):
		return fmt.Errorf("the absolute path %q", p)
	case strings.ContainsAny(p, "\\\x00"):
		return fmt.Errorf("the path %q with a backslash or NUL", p)
	case p == syncFile:
		return fmt.Errorf("the reserved path %q", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == "" || el == "." || el == ".." {
			return fmt.Errorf("the path %q, which leaves its directory or has an empty element", p)
		}
	}
	return nil
}

// Vault files: Penguin's, and PenguinHarness's, which an agent imported
// from it keeps.
const (
	VaultFile          = ".vault.yaml"
	ReferenceVaultFile = ".vault.toml"
)

// IsVault reports whether a path is an agent's vault, whose values never
// leave the engine.
func IsVault(p string) bool { return p == VaultFile || p == ReferenceVaultFile }
