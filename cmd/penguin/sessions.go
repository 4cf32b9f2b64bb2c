package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/config"
)

// sessions is `penguin sessions list | show ID | export ID [DIR] | delete ID`,
// against --engine or the embedded server over the same data directory.
func sessions(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin sessions", flag.ContinueOnError)
	cf := addClientFlags(fs)
	cf.embedded.llmOptional = true
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: penguin sessions [flags] list | show ID | export ID [DIR] | delete ID\n\nexport writes one trace file per model context into DIR (default: the\ncurrent directory), named ID_001.jsonl, ID_002.jsonl, ...\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := config.Parse(fs, args, os.LookupEnv); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		fs.Usage()
		return fmt.Errorf("sessions: name a command: list, show ID, export ID [DIR] or delete ID")
	}
	switch fs.Arg(0) {
	case "list", "show", "export", "delete":
	default:
		return fmt.Errorf("sessions: unknown command %q: want list, show ID, export ID [DIR] or delete ID", fs.Arg(0))
	}
	conn, err := cf.connect(ctx)
	if err != nil {
		return fmt.Errorf("sessions: %w", err)
	}
	defer conn.Close()
	if err := cli.Sessions(ctx, conn.engine, fs.Args(), os.Stdout, useColor(os.Stdout)); err != nil {
		return fmt.Errorf("sessions: %w", statusError(err))
	}
	return nil
}
