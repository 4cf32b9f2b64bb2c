package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	"github.com/penguin-agent/penguin/internal/cli"
)

// maxStdinPrompt bounds a prompt read from standard input, so a pipe that
// never ends cannot fill memory.
const maxStdinPrompt = 4 << 20

// newRunCmd is `penguin run [flags] PROMPT`: it sends one message, streams
// the task to the terminal (or as JSON lines with --json) and exits with
// the task's status: 0 when it completed, 130 when it was aborted, 1
// otherwise, so scripts can check it.
func newRunCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "run [flags] PROMPT",
		Short: "send one message to an agent, run the task to its end, exit",
		Long: `Runs one task and exits: 0 when it completed, 130 when it was aborted, 1
otherwise.

The message is the arguments (flags may come before or after them), or
--message, or standard input when neither is given.`,
		Example: `  penguin run --provider openai --model gpt-4o "Why does test.sh fail?"
  penguin run "Fix it" --approval always-ask
  go test ./... 2>&1 | penguin run --provider anthropic --model claude-sonnet-4-5`,
	}
	fs := cmd.Flags()
	var message string
	fs.StringVarP(&message, "message", "m", "", "the message to send (the arguments, or standard input, otherwise)")
	sf := addSessionFlags(cmd)
	cf := addClientFlags(fs)
	sessionID := fs.String("session", "", "continue this session instead of creating one")
	jsonLines := fs.Bool("json", false, "print every event as one JSON line instead of text")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		prompt, fromStdin, err := readPrompt(message, args, os.Stdin)
		if err != nil {
			return err
		}
		ps, err := sf.parse()
		if err != nil {
			return err
		}
		if *sessionID != "" && (sf.provider != "" || sf.workspace != "") {
			return usageErrorf("a continued session keeps its model and workspace; drop --provider, --model and --workspace")
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
		for _, w := range cli.ProviderWarnings(ctx, conn.llm) {
			fmt.Fprintln(os.Stderr, w)
		}

		approver, closeApprover := runApprover(fromStdin)
		defer closeApprover()
		opts := cli.TaskOptions{
			SessionID:     id,
			Prompt:        prompt,
			ThinkingLevel: ps.thinking,
			Approver:      approver,
			Reattach:      3,
		}
		if *sessionID == "" || cmd.Flags().Changed("approval") {
			opts.ApprovalMode = ps.approval
		}
		// On a terminal the answer is rendered markdown and a status line
		// counts the time, the tokens and any retry's wait; a pipe gets
		// the text as it comes.
		tty := !*jsonLines && isTerminal(os.Stdout)
		var out io.Writer = os.Stdout
		if tty {
			opts.Status = cli.NewStatusLine(os.Stdout)
			out = opts.Status
		}
		r := cli.NewRenderer(out, cli.RendererOptions{
			Color: !*jsonLines && useColor(os.Stdout), JSON: *jsonLines,
			Markdown: tty, Width: terminalWidth(os.Stdout), Countdown: tty,
		})
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
	return cmd
}

// readPrompt returns the message of `penguin run`: --message, the
// arguments, or else standard input when it is not a terminal ("-" as the
// only argument asks for standard input explicitly). fromStdin reports
// that standard input was used up.
func readPrompt(message string, args []string, stdin *os.File) (prompt string, fromStdin bool, err error) {
	switch {
	case message != "" && len(args) > 0:
		return "", false, usageErrorf("give the message either with -m or as arguments, not both")
	case message != "":
		prompt = message
	case len(args) == 1 && args[0] == "-", len(args) == 0 && !isTerminal(stdin):
		raw, err := io.ReadAll(io.LimitReader(stdin, maxStdinPrompt+1))
		if err != nil {
			return "", false, fmt.Errorf("read the message from standard input: %w", err)
		}
		if len(raw) > maxStdinPrompt {
			return "", false, usageErrorf("the message on standard input is larger than %d MiB", maxStdinPrompt>>20)
		}
		prompt, fromStdin = string(raw), true
	default:
		prompt = strings.Join(args, " ")
	}
	if strings.TrimSpace(prompt) == "" {
		return "", false, usageErrorf("no message: penguin run [flags] PROMPT, or pipe it in: echo PROMPT | penguin run")
	}
	return strings.TrimSpace(prompt), fromStdin, nil
}

// runApprover answers approvals on the terminal: standard input, or the
// controlling terminal when standard input carried the message. Without
// either, nobody can answer and every approval is denied.
func runApprover(stdinUsed bool) (cli.Approver, func()) {
	if !stdinUsed {
		return &cli.LineApprover{In: bufio.NewReader(os.Stdin), Out: os.Stderr}, func() {}
	}
	tty, err := os.Open("/dev/tty")
	if err != nil {
		return nil, func() {}
	}
	return &cli.LineApprover{In: bufio.NewReader(tty), Out: os.Stderr}, func() { _ = tty.Close() }
}

// terminalWidth is the width of the terminal f, or 0 when it is none.
func terminalWidth(f *os.File) int {
	w, _, err := term.GetSize(f.Fd())
	if err != nil {
		return 0
	}
	return w
}
