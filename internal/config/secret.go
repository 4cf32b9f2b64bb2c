package config

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrSecretConflict is returned by [Secret] when a secret is given both in
// its environment variable and as a file: silently preferring one would hide
// a deployment mistake.
var ErrSecretConflict = errors.New("secret given both in the environment and as a file")

// Secret returns a secret taken from the environment variable envVar, or
// read from the file at path. A flag may name the file (for example
// --auth-token-file) but never carries the secret itself, because command
// lines are visible to every user of the machine.
//
// Surrounding white space, such as the newline an editor leaves at the end
// of a file, is removed. An empty file is an error, because an empty secret
// would quietly turn protection off. When neither source is given, Secret
// returns "" and no error: whether the secret is required is the caller's
// decision.
func Secret(lookup LookupFunc, envVar, path string) (string, error) {
	fromEnv, inEnv := lookup(envVar)
	inEnv = inEnv && fromEnv != ""
	switch {
	case inEnv && path != "":
		return "", fmt.Errorf("%s and file %s: %w", envVar, path, ErrSecretConflict)
	case inEnv:
		return strings.TrimSpace(fromEnv), nil
	case path == "":
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read secret file: %w", err)
	}
	secret := strings.TrimSpace(string(data))
	if secret == "" {
		return "", fmt.Errorf("secret file %s is empty", path)
	}
	return secret, nil
}
