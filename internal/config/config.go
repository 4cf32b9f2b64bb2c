// Package config gives every penguin command the same configuration rules:
// each flag can also be set through a PENGUIN_* environment variable (so a
// container can be configured without a command line), secrets come from the
// environment or from a file and never from a flag (so they never show up in
// ps output or shell history), and logs are built the same way everywhere.
//
// Nothing here reads the process environment by itself: callers pass a
// [LookupFunc], usually [os.LookupEnv], so tests can use [MapLookup] and run
// in parallel.
package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// EnvPrefix starts the name of every environment variable penguin reads.
const EnvPrefix = "PENGUIN_"

// LookupFunc reads one environment variable, reporting whether it is set.
// [os.LookupEnv] is the one a program passes.
type LookupFunc func(key string) (string, bool)

// MapLookup returns a [LookupFunc] over a fixed map, for tests and for
// callers that build their environment by hand.
func MapLookup(m map[string]string) LookupFunc {
	return func(key string) (string, bool) {
		v, ok := m[key]
		return v, ok
	}
}

// EnvName returns the environment variable that backs the flag called
// flagName: "auth-token-file" becomes "PENGUIN_AUTH_TOKEN_FILE". The rule is
// mechanical so that nobody has to look the name up.
func EnvName(flagName string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// DocumentEnv appends the name of each flag's environment variable (see
// [EnvName]) to its usage text, so help shows it. Flags named in skip (help
// and version, which no environment should set) are left alone. Calling it
// twice does not repeat the suffix.
func DocumentEnv(fs *pflag.FlagSet, skip ...string) {
	fs.VisitAll(func(f *pflag.Flag) {
		if slices.Contains(skip, f.Name) {
			return
		}
		suffix := " [$" + EnvName(f.Name) + "]"
		if !strings.HasSuffix(f.Usage, suffix) {
			f.Usage += suffix
		}
	})
}

// ApplyEnv gives every flag of fs that the command line left unset the
// value of its environment variable (see [EnvName]), when that variable is
// set and not empty; flags named in skip are left alone. Call it after the
// command line was parsed: the command line wins over the environment and
// the environment wins over the flag's default.
//
// Every environment value a flag rejects is reported, naming both the
// variable and the flag, so a bad deployment fails at start-up rather than
// running with the default.
func ApplyEnv(fs *pflag.FlagSet, lookup LookupFunc, skip ...string) error {
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed || slices.Contains(skip, f.Name) {
			return
		}
		env := EnvName(f.Name)
		v, ok := lookup(env)
		if !ok || v == "" {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Errorf("%s=%q: invalid value for --%s: %w", env, v, f.Name, err))
		}
	})
	return errors.Join(errs...)
}
