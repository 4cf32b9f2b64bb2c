package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// newMockLLMCmd serves a scripted stand-in for a model provider's HTTP API:
// `penguin mockllm --listen ADDR --script FILE [--api-key-env NAME]`. It
// speaks OpenAI Chat Completions and the Responses API (base URL
// http://ADDR/v1), Anthropic Messages (base URL http://ADDR) and Gemini
// (base URL http://ADDR/v1beta), and refuses what the real APIs refuse;
// http://ADDR/PROVIDER/… imitates one catalog provider (its models, its
// rules). So the other commands can be tried and tested end to end without
// a real model. The script format is described in
// internal/testkit/emulator/SCRIPT.md.
func newMockLLMCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "mockllm", Short: "serve a scripted stand-in for a model provider, for tests and demos", Args: noArgs}
	fs := cmd.Flags()
	listen := fs.String("listen", "127.0.0.1:7429", "address to listen on (port 0 picks a free one)")
	script := fs.String("script", "", "YAML script of the turns to play (required)")
	keyEnv := fs.String("api-key-env", "", "name of the environment variable holding the API key clients must send; empty accepts any key")
	drain := fs.Duration("shutdown-timeout", 5*time.Second, "how long open streams may take to end on stop")
	mustComplete(cmd, "script", cobra.FixedCompletions([]string{"yaml", "yml"}, cobra.ShellCompDirectiveFilterFileExt))
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if *script == "" {
			return usageErrorf("mockllm: --script is required (or set PENGUIN_SCRIPT)")
		}
		return mockLLM(cmd.Context(), *listen, *script, *keyEnv, *drain)
	}
	return cmd
}

func mockLLM(ctx context.Context, listen, script, keyEnv string, drain time.Duration) error {
	log, err := config.LoggerFromEnv(os.Stderr, os.LookupEnv)
	if err != nil {
		return fmt.Errorf("mockllm: %w", err)
	}
	s, err := emulator.LoadScript(script)
	if err != nil {
		return fmt.Errorf("mockllm: %w", err)
	}
	opts := []emulator.Option{emulator.WithLogger(log)}
	if keyEnv != "" {
		// Asking for a key and finding none must not turn the check off.
		key, ok := os.LookupEnv(keyEnv)
		if !ok || key == "" {
			return fmt.Errorf("mockllm: --api-key-env names %s, which is not set", keyEnv)
		}
		opts = append(opts, emulator.WithAPIKey(key))
	}

	// ctx ends on SIGINT or SIGTERM (see main); Serve then drains and stops.
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("mockllm: %w", err)
	}
	url := "http://" + ln.Addr().String()
	log.Info("mockllm listening", "url", url, "openai_base_url", url+"/v1", "anthropic_base_url", url, "gemini_base_url", url+"/v1beta",
		"script", script, "turns", len(s.Turns), "api_key", keyEnv != "")
	if err := emulator.New(s, opts...).Serve(ctx, ln, drain); err != nil {
		return fmt.Errorf("mockllm: %w", err)
	}
	log.Info("mockllm stopped")
	return nil
}
