package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
)

// chatHistoryFile is the file, in the data directory, that keeps the lines
// typed into `penguin chat` across runs.
const chatHistoryFile = "chat_history"

// resumeLatest is the value of a bare --resume: the latest session.
const resumeLatest = "\x00latest"

// newChatCmd is `penguin chat`: an interactive session in the terminal.
// Each message starts a task; a message typed while one runs steers it;
// approvals are asked in place of the input line; Ctrl-C denies a pending
// approval, aborts a running task, clears a half-typed line, and quits
// when pressed twice at an empty prompt.
func newChatCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "chat [flags]",
		Short: "talk to an agent interactively",
		Long: `Talks to an agent in the terminal. Enter sends; Alt-Enter, Ctrl-J or a
trailing backslash starts a new line, and a paste is one message. Up and
Down recall earlier messages, also from earlier chats. Type /help for the
commands.`,
		Example: `  penguin chat --provider anthropic --model claude-sonnet-4-5
  penguin chat --resume            # the latest session
  penguin chat --resume session-2026-…`,
	}
	fs := cmd.Flags()
	sf := addSessionFlags(cmd)
	cf := addClientFlags(fs)
	resume := fs.String("resume", "", "resume a session: --resume ID, or --resume alone for the latest one")
	fs.Lookup("resume").NoOptDefVal = resumeLatest
	verbose := fs.Bool("verbose", false, "show tool outputs in full instead of collapsed")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		// A terminal that goes away (its window closed, its ssh session
		// ended) hangs the chat up: it ends, and so does its embedded
		// server. Only the chat listens for SIGHUP: a server reloads its
		// providers on it.
		ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGHUP)
		defer stop()
		resumed := cmd.Flags().Changed("resume")
		id := *resume
		switch {
		case resumed && id == resumeLatest && len(args) == 1:
			// "--resume ID": a flag with an optional value takes it only
			// after "=", so the ID arrives as the argument.
			id = args[0]
		case len(args) > 0:
			return usageErrorf("chat: unexpected arguments %q (chat reads its messages from the terminal)", args)
		}
		if resumed && (sf.provider != "" || sf.workspace != "") {
			return usageErrorf("chat: a resumed session keeps its model and workspace; drop --provider, --model and --workspace")
		}
		ps, err := sf.parse()
		if err != nil {
			return err
		}
		if !isTerminal(os.Stdin) || !isTerminal(os.Stdout) {
			return usageErrorf("chat needs a terminal; penguin run takes a message from arguments or standard input")
		}

		conn, err := cf.connect(ctx)
		if err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		defer conn.Close()
		if err := conn.complete(ps); err != nil && !resumed {
			return fmt.Errorf("chat: %w", err)
		}
		if id == resumeLatest {
			if id, err = latestSession(ctx, conn.engine, ps.project); err != nil {
				return fmt.Errorf("chat: %w", err)
			}
		}
		home, err := cf.embedded.engine.dataDir()
		if err != nil {
			return fmt.Errorf("chat: %w", err)
		}
		opts := cli.ChatOptions{
			SessionID:     id,
			NewSession:    ps.createRequest(),
			ThinkingLevel: ps.thinking,
			Verbose:       *verbose,
			Color:         useColor(os.Stdout),
			HistoryFile:   filepath.Join(home, chatHistoryFile),
			LLM:           conn.llm,
			LogFile:       conn.logPath,
			AgentThinking: conn.defaultThinking,
		}
		if resumed && cmd.Flags().Changed("approval") {
			// A resumed session keeps its mode unless asked otherwise.
			opts.ApprovalMode = ps.approval
		}
		if err := cli.Chat(ctx, conn.engine, opts, os.Stdin, os.Stdout); err != nil {
			return fmt.Errorf("chat: %w", statusError(err))
		}
		return nil
	}
	return cmd
}

// latestSession returns the newest session a person started (not a
// subagent's), in project when one is named.
func latestSession(ctx context.Context, engine penguinv1.EngineServiceClient, project string) (string, error) {
	token := ""
	for {
		resp, err := engine.ListSessions(ctx, &penguinv1.ListSessionsRequest{PageSize: 50, PageToken: token, ProjectId: project})
		if err != nil {
			return "", fmt.Errorf("list sessions: %w", statusError(err))
		}
		for _, s := range resp.GetSessions() {
			if s.GetParentSessionId() == "" && s.GetSource() != "subagent" {
				return s.GetSessionId(), nil
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return "", errNoSession
		}
	}
}
