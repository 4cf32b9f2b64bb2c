package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/penguin-agent/penguin/services/environment"
)

// newServeEnvironmentCmd is `penguin serve environment --listen ADDR
// --root DIR`: the environment service alone, for a deployment where
// sandboxes scale on their own. Every workspace must lie under the root. A
// graceful stop disposes every environment first, which ends every process
// the service started, then drains the remaining calls.
func newServeEnvironmentCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "environment", Short: "run the environment service (workspaces and tools) alone", Args: noArgs}
	fs := cmd.Flags()
	common := addServerFlags(fs, "127.0.0.1:7422")
	env := &environment.Config{}
	fs.StringVar(&env.Root, "root", "", "directory every workspace must lie under (default: the current directory)")
	fs.StringVar(&env.Advertise, "advertise", "", "the address at which engines reach the environments this replica creates, returned by CreateEnvironment (for example $(POD_IP):7422 behind a headless Service); empty when there is one replica")
	addEnvironmentFlags(fs, env)
	mustComplete(cmd, "root", cobra.FixedCompletions(nil, cobra.ShellCompDirectiveFilterDirs))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		cfg, err := common.process("environment")
		if err != nil {
			return fmt.Errorf("serve environment: %w", err)
		}
		env.HidePaths = common.secretFiles()
		cfg.Environment = env
		return serveProcess(cmd.Context(), "serve environment", cfg)
	}
	return cmd
}
