package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/engine/trace"
)

// runTask is `penguin run [flags] PROMPT`: it sends one message, streams
// the task to the terminal (or as JSON lines with --json) and exits with
// the task's status: 0 when it completed, 130 when it was aborted, 1
// otherwise, so scripts can check it.
func runTask(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin run", flag.ContinueOnError)
	var message string
	fs.StringVar(&message, "message", "", "the message to send; the arguments after the flags are the message too")
	fs.StringVar(&message, "m", "", "shorthand for --message")
	sf := addSessionFlags(fs)
	cf := addClientFlags(fs)
	sessionID := fs.String("session", "", "continue this session instead of creating one")
	jsonLines := fs.Bool("json", false, "print every event as one JSON line instead of text")
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "Usage: penguin run [flags] PROMPT\n\nRuns one task and exits: 0 when it completed, 130 when it was aborted, 1 otherwise.\n\nFlags:")
		fs.PrintDefaults()
	}
	if err := config.Parse(fs, args, os.LookupEnv); err != nil {
		return err
	}
	prompt := strings.TrimSpace(message)
	switch {
	case prompt != "" && fs.NArg() > 0:
		return fmt.Errorf("run: give the message either with -m or as arguments, not both")
	case prompt == "":
		prompt = strings.TrimSpace(strings.Join(fs.Args(), " "))
	}
	if prompt == "" {
		return errors.New("run: no message: penguin run [flags] PROMPT")
	}
	ps, err := sf.parse()
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	if *sessionID != "" && (sf.provider != "" || sf.workspace != "") {
		return errors.New("run: a continued session keeps its model and workspace; drop --provider, --model and --workspace")
	}

	conn, err := cf.connect(ctx)
	if err != nil {
		return fmt.Errorf("run: %w", err)
	}
	defer conn.Close()
	if err := conn.complete(ps); err != nil && *sessionID == "" {
		return fmt.Errorf("run: %w", err)
	}

	id := *sessionID
	if id == "" {
		resp, err := conn.engine.CreateSession(ctx, ps.createRequest())
		if err != nil {
			return fmt.Errorf("run: create session: %w", statusError(err))
		}
		id = resp.GetSession().GetSessionId()
	}
	fmt.Fprintf(os.Stderr, "session %s\n", id)

	opts := cli.TaskOptions{
		SessionID:     id,
		Prompt:        prompt,
		ThinkingLevel: ps.thinking,
		Approver:      &cli.LineApprover{In: bufio.NewReader(os.Stdin), Out: os.Stderr},
		Reattach:      3,
	}
	if *sessionID == "" || flagSet(fs, "approval") {
		opts.ApprovalMode = ps.approval
	}
	r := cli.NewRenderer(os.Stdout, cli.RendererOptions{Color: !*jsonLines && useColor(os.Stdout), JSON: *jsonLines, Encode: trace.Marshal})
	code, err := cli.RunTask(ctx, conn.engine, opts, r)
	if err != nil {
		return fmt.Errorf("run: %w", statusError(err))
	}
	switch code {
	case cli.ExitCompleted:
		return nil
	case cli.ExitAborted:
		return &exitError{code: code, msg: "run: the task was aborted"}
	default:
		return &exitError{code: code, msg: "run: the task failed"}
	}
}
