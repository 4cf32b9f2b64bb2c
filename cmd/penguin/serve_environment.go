package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/environment"
)

// serveEnvironment runs the environment service alone, for a deployment
// where sandboxes scale on their own: `penguin serve environment --listen
// ADDR --root DIR`. Every workspace must lie under the root. A graceful
// stop disposes every environment first, which ends every process the
// service started, then drains the remaining calls.
func serveEnvironment(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin serve environment", flag.ContinueOnError)
	common := addServerFlags(fs, "127.0.0.1:7422")
	env := &environment.Config{}
	fs.StringVar(&env.Root, "root", "", "directory every workspace must lie under (default: the current directory)")
	fs.StringVar(&env.Advertise, "advertise", "", "the address at which engines reach the environments this replica creates, returned by CreateEnvironment (for example $(POD_IP):7422 behind a headless Service); empty when there is one replica")
	addEnvironmentFlags(fs, env)
	if err := config.Parse(fs, args, os.LookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve environment: unexpected arguments %q", fs.Args())
	}
	cfg, err := common.process("environment")
	if err != nil {
		return fmt.Errorf("serve environment: %w", err)
	}
	env.HidePaths = common.secretFiles()
	cfg.Environment = env
	return serveProcess(ctx, "serve environment", cfg)
}
