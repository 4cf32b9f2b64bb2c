package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm"
)

// serveLLM runs the llm service alone: `penguin serve llm --listen ADDR
// --providers FILE`. Every flag also reads its PENGUIN_* variable; the
// bearer token comes from PENGUIN_AUTH_TOKEN or --auth-token-file, never
// from a flag.
func serveLLM(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin serve llm", flag.ContinueOnError)
	common := addServerFlags(fs, "127.0.0.1:7421")
	lf := addLLMFlags(fs)
	if err := config.Parse(fs, args, os.LookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve llm: unexpected arguments %q", fs.Args())
	}
	cfg, err := common.process("llm")
	if err != nil {
		return fmt.Errorf("serve llm: %w", err)
	}
	cfg.LLM = lf.config()
	return serveProcess(ctx, "serve llm", cfg)
}

// llmFlags are the llm service's own flags, shared by `penguin serve llm`,
// the all-in-one `penguin serve` and the embedded server of `penguin run`.
type llmFlags struct {
	providersFile  string
	requestTimeout time.Duration
	idleTimeout    time.Duration
}

func addLLMFlags(fs *flag.FlagSet) *llmFlags {
	f := &llmFlags{}
	fs.StringVar(&f.providersFile, "providers", "", "providers YAML file; empty takes OPENAI_API_KEY / ANTHROPIC_API_KEY from the environment")
	fs.DurationVar(&f.requestTimeout, "request-timeout", llm.DefaultRequestTimeout, "timeout of a model request that sets none; 0 or less turns it off")
	fs.DurationVar(&f.idleTimeout, "idle-timeout", llm.DefaultIdleTimeout, "end a provider stream that sends nothing for this long; 0 or less turns it off")
	return f
}

// config turns the flags into the llm service's Config.
func (f *llmFlags) config() *llm.Config {
	// A flag at zero means "off" for the operator; Setup reads zero as
	// "default", so turn it into a negative duration.
	off := func(d time.Duration) time.Duration {
		if d <= 0 {
			return -1
		}
		return d
	}
	return &llm.Config{
		ProvidersFile:  f.providersFile,
		Lookup:         os.LookupEnv,
		IdleTimeout:    off(f.idleTimeout),
		RequestTimeout: off(f.requestTimeout),
	}
}
