//go:build !linux

package pgtest

import "errors"

// startPrivate is Linux's only: elsewhere, point PENGUIN_TEST_POSTGRES_URL
// at a server.
func startPrivate() (string, error) {
	return "", errors.New("a private PostgreSQL server is started on Linux only; point PENGUIN_TEST_POSTGRES_URL at a server")
}
