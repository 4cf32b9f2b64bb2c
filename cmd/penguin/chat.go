package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/cli"
	"github.com/penguin-agent/penguin/internal/config"
)

// chat is `penguin chat`: an interactive session in the terminal. Each
// line starts a task; a line typed while one runs steers it; approvals are
// asked at the prompt; Ctrl-C denies a pending approval, aborts a running
// task, and quits when pressed twice at the prompt.
func chat(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin chat", flag.ContinueOnError)
	sf := addSessionFlags(fs)
	cf := addClientFlags(fs)
	var resume resumeFlag
	fs.Var(&resume, "resume", "resume a session: --resume ID, or --resume alone for the latest one")
	verbose := fs.Bool("verbose", false, "show tool outputs in full instead of collapsed")
	if err := config.Parse(fs, joinResumeID(args), os.LookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("chat: unexpected arguments %q (chat reads its messages from the terminal)", fs.Args())
	}
	if resume.set && (sf.provider != "" || sf.workspace != "") {
		return errors.New("chat: a resumed session keeps its model and workspace; drop --provider, --model and --workspace")
	}
	ps, err := sf.parse()
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}

	// Ctrl-C belongs to the chat: it aborts a task instead of ending the
	// process, so take SIGINT away from main's context (SIGTERM still ends
	// it) and hand it to cli.Chat as a channel.
	interrupt := make(chan os.Signal, 1)
	signal.Reset(os.Interrupt)
	signal.Notify(interrupt, os.Interrupt)
	defer signal.Stop(interrupt)

	conn, err := cf.connect(ctx)
	if err != nil {
		return fmt.Errorf("chat: %w", err)
	}
	defer conn.Close()
	if err := conn.complete(ps); err != nil && !resume.set {
		return fmt.Errorf("chat: %w", err)
	}

	id := resume.id
	if resume.set && id == "" {
		if id, err = latestSession(ctx, conn.engine); err != nil {
			return fmt.Errorf("chat: %w", err)
		}
	}
	opts := cli.ChatOptions{
		SessionID:     id,
		NewSession:    ps.createRequest(),
		ThinkingLevel: ps.thinking,
		Verbose:       *verbose,
		Color:         useColor(os.Stdout),
	}
	if resume.set && flagSet(fs, "approval") {
		// A resumed session keeps its mode unless asked otherwise.
		opts.ApprovalMode = ps.approval
	}
	err = cli.Chat(ctx, conn.engine, opts, os.Stdin, os.Stdout, interrupt)
	if err != nil {
		return fmt.Errorf("chat: %w", statusError(err))
	}
	return nil
}

// latestSession returns the newest session a person started (not a
// subagent's).
func latestSession(ctx context.Context, engine penguinv1.EngineServiceClient) (string, error) {
	token := ""
	for {
		resp, err := engine.ListSessions(ctx, &penguinv1.ListSessionsRequest{PageSize: 50, PageToken: token})
		if err != nil {
			return "", fmt.Errorf("list sessions: %w", statusError(err))
		}
		for _, s := range resp.GetSessions() {
			if s.GetParentSessionId() == "" && s.GetSource() != "subagent" {
				return s.GetSessionId(), nil
			}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return "", errors.New("there is no session to resume yet")
		}
	}
}

// joinResumeID turns "--resume ID" into "--resume=ID": --resume may stand
// alone, so the flag package would take a separate ID for the first
// argument and stop reading flags there.
func joinResumeID(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		if (a == "--resume" || a == "-resume") && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// resumeFlag is --resume with an optional value: alone it means the latest
// session, --resume=ID (or --resume ID) a given one.
type resumeFlag struct {
	set bool
	id  string
}

func (f *resumeFlag) String() string { return f.id }

func (f *resumeFlag) Set(v string) error {
	f.set = true
	if v != "true" {
		f.id = v
	}
	return nil
}

// IsBoolFlag lets --resume stand alone.
func (f *resumeFlag) IsBoolFlag() bool { return true }
