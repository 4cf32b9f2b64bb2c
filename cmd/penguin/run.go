package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/charmbracelet/x/term"
	"github.com/spf13/cobra"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/goal"
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

With --goal the message is an objective: the task runs in rounds until the
model claims it complete or blocked, or the token budget runs out; the exit
status is 0 only when the goal completes.

The message is the arguments (flags may come before or after them), or
--message, or standard input when neither is given.`,
		Example: `  penguin run --provider openai --model gpt-4o "Why does test.sh fail?"
  penguin run "Fix it" --approval always-ask
  penguin run --image screenshot.png "Why is the button cut off?"
  penguin run --goal 500k -m "make all tests pass"
  penguin run --skill code-review "review the last commit"
  go test ./... 2>&1 | penguin run --provider anthropic --model claude-sonnet-4-5`,
	}
	fs := cmd.Flags()
	var message string
	fs.StringVarP(&message, "message", "m", "", "the message to send (the arguments, or standard input, otherwise)")
	sf := addSessionFlags(cmd)
	cf := addClientFlags(fs)
	sessionID := fs.String("session", "", "continue this session instead of creating one")
	jsonLines := fs.Bool("json", false, "print every event as one JSON line instead of text")
	goalFlag := fs.String("goal", "", "run the message as a goal's objective, in rounds until the model claims it complete or blocked; an optional token budget (--goal=500k, 2m; none: unlimited). Exit status 0 only when the goal completes")
	fs.Lookup("goal").NoOptDefVal = goalUnlimited
	imagePaths := fs.StringArray("image", nil, "attach an image to the message: a PNG, JPEG, GIF or WebP file of at most 5 MiB (repeatable, at most 8)")
	skills := fs.StringArray("skill", nil, "pin an installed, enabled skill of the session's agent for this task: the message starts with a [use_skills] block naming it, and the model reads it first (repeatable)")
	filePaths := fs.StringArray("file", nil, "put a text file of at most 256 KiB into the message, named and fenced (repeatable)")
	mustComplete(cmd, "image", cobra.FixedCompletions([]string{"png", "jpg", "jpeg", "gif", "webp"}, cobra.ShellCompDirectiveFilterFileExt))
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		ctx := cmd.Context()
		goalOpts, args, err := parseGoalFlag(cmd.Flags().Changed("goal"), *goalFlag, message != "", args)
		if err != nil {
			return err
		}
		prompt, fromStdin, err := readPrompt(message, args, os.Stdin)
		if err != nil {
			return err
		}
		var att cli.Attachments
		for _, p := range *imagePaths {
			if err := att.AddImage(p); err != nil {
				return usageErrorf("--image: %v", err)
			}
		}
		for _, p := range *filePaths {
			if err := att.AddFile(p); err != nil {
				return usageErrorf("--file: %v", err)
			}
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
			Prompt:        att.Prompt(prompt),
			Images:        att.Images,
			ThinkingLevel: ps.thinking,
			Approver:      approver,
			Reattach:      3,
			Goal:          goalOpts,
			Skills:        *skills,
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
		what := "task"
		if goalOpts != nil {
			what = "goal"
		}
		switch code {
		case cli.ExitCompleted:
			return nil
		case cli.ExitAborted:
			return &exitError{code: code, msg: "run: the " + what + " was aborted"}
		default:
			return &exitError{code: code, msg: "run: the " + what + " did not complete"}
		}
	}
	return cmd
}

// goalUnlimited is the value of a bare --goal.
const goalUnlimited = "unlimited"

// parseGoalFlag reads --goal. A bare --goal may be followed by its budget
// as the next word (`--goal 500k -m "…"`, or `--goal 2m fix the tests`)
// when that word reads as a budget and the message is elsewhere;
// `--goal=500k` is never ambiguous. It returns the goal (nil without
// --goal) and the arguments left for the message.
func parseGoalFlag(set bool, value string, haveMessage bool, args []string) (*penguinv1.GoalOptions, []string, error) {
	if !set {
		return nil, args, nil
	}
	if value == goalUnlimited {
		value = ""
		if len(args) > 0 && (haveMessage || len(args) > 1) {
			if _, err := goal.ParseBudget(args[0]); err == nil {
				value, args = args[0], args[1:]
			}
		}
	}
	budget, err := goal.ParseBudget(value)
	if err != nil {
		return nil, nil, usageErrorf("--goal: %v", err)
	}
	return &penguinv1.GoalOptions{Budget: budget}, args, nil
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
