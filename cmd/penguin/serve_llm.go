package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm"
)

// newServeLLMCmd is `penguin serve llm --listen ADDR --providers FILE`:
// the llm service alone. The bearer token comes from PENGUIN_AUTH_TOKEN or
// --auth-token-file, never from a flag.
func newServeLLMCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "llm", Short: "run the llm service (model gateway) alone", Args: noArgs}
	common := addServerFlags(cmd.Flags(), "127.0.0.1:7421")
	lf := addLLMFlags(cmd.Flags())
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := common.process("llm")
		if err != nil {
			return fmt.Errorf("serve llm: %w", err)
		}
		if cfg.LLM, err = lf.config(); err != nil {
			return fmt.Errorf("serve llm: %w", err)
		}
		return serveProcess(cmd.Context(), "serve llm", cfg)
	}
	return cmd
}

// llmFlags are the llm service's own flags, shared by `penguin serve llm`,
// the all-in-one `penguin serve` and the embedded server of `penguin run`.
type llmFlags struct {
	providersFile  string
	routesStore    string
	routesKeyFile  string
	catalog        string
	requestTimeout time.Duration
	idleTimeout    time.Duration
}

func addLLMFlags(fs *pflag.FlagSet) *llmFlags {
	f := &llmFlags{}
	fs.StringVar(&f.providersFile, "providers", "", "providers YAML `FILE`, reloaded when it changes and on SIGHUP (default for penguin serve: providers.yaml in the data directory); the API key variables (OPENAI_API_KEY, DEEPSEEK_API_KEY, …) add the providers it does not name")
	fs.StringVar(&f.routesStore, "routes-store", "", "where the provider routes added through the API and the web app are kept: a postgres:// `URL` shared by every llm replica, or a SQLite path (default for penguin serve: the engine's store)")
	fs.StringVar(&f.routesKeyFile, "routes-key-file", "", "`FILE` holding the secret (32 bytes or more) that encrypts the stored routes' API keys, the same for every replica; or set "+routesKeyVar+" (default for penguin serve with a SQLite store: routes.key in the data directory, made on first use)")
	fs.StringVar(&f.catalog, "catalog", "", "model catalog `FILE` or http(s) URL laid over the built-in one (see penguin models)")
	fs.DurationVar(&f.requestTimeout, "request-timeout", llm.DefaultRequestTimeout, "timeout of a model request that sets none; 0 or less turns it off")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", llm.DefaultIdleTimeout, "end a provider stream that sends nothing for this long; 0 or less turns it off")
	return f
}

// routesKeyVar holds the route key secret when no file is named.
const routesKeyVar = "PENGUIN_ROUTES_KEY"

// config turns the flags into the llm service's Config, reading the route
// key secret when there is a route store.
func (f *llmFlags) config() (*llm.Config, error) {
	// A flag at zero means "off" for the operator; Setup reads zero as
	// "default", so turn it into a negative duration.
	off := func(d time.Duration) time.Duration {
		if d <= 0 {
			return -1
		}
		return d
	}
	cfg := &llm.Config{
		ProvidersFile:  f.providersFile,
		RouteStore:     f.routesStore,
		Catalog:        f.catalog,
		Lookup:         os.LookupEnv,
		IdleTimeout:    off(f.idleTimeout),
		RequestTimeout: off(f.requestTimeout),
	}
	secret, err := config.Secret(os.LookupEnv, routesKeyVar, f.routesKeyFile)
	switch {
	case err != nil:
		return nil, fmt.Errorf("the route key secret: %w", err)
	case secret == "" && f.routesStore != "":
		return nil, fmt.Errorf("--routes-store needs the secret that encrypts the routes' keys: --routes-key-file FILE or %s", routesKeyVar)
	}
	cfg.RouteSecret = []byte(secret)
	return cfg, nil
}
