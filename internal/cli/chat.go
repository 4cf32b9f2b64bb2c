package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ChatOptions configure an interactive chat.
type ChatOptions struct {
	// SessionID continues a session; empty creates one from NewSession.
	SessionID string
	// NewSession describes the sessions /clear and a fresh chat create.
	NewSession *penguinv1.CreateSessionRequest
	// ThinkingLevel is the initial per-turn override.
	ThinkingLevel penguinv1.ThinkingLevel
	// ApprovalMode, when set, changes the session's approval mode from the
	// chat's first task on (for a resumed session; a new one gets its mode
	// from NewSession).
	ApprovalMode penguinv1.ApprovalMode
	// Verbose shows tool outputs in full instead of collapsed.
	Verbose bool
	// Color enables ANSI styles.
	Color bool
	// DoubleInterrupt is how soon a second Ctrl-C at the prompt quits;
	// zero means two seconds.
	DoubleInterrupt time.Duration
}

// chat is the state of one interactive session.
type chat struct {
	engine    penguinv1.EngineServiceClient
	opts      ChatOptions
	out       io.Writer
	lines     <-chan string
	interrupt <-chan os.Signal
	session   string
	thinking  penguinv1.ThinkingLevel
	verbose   bool
}

// readLines feeds the lines of in to a channel, closed at end of input.
func readLines(in io.Reader) <-chan string {
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(in)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// Chat runs the interactive loop: each line starts a task; a line typed
// while a task runs steers it; Ctrl-C (a value on interrupt) denies a
// pending approval, aborts a running task, and at the prompt quits when
// pressed twice. Slash commands: /compact, /clear, /thinking [LEVEL],
// /resume [ID], /verbose, /exit. It returns when the input ends or the user
// quits, after printing how to resume.
func Chat(ctx context.Context, engine penguinv1.EngineServiceClient, opts ChatOptions, in io.Reader, out io.Writer, interrupt <-chan os.Signal) error {
	if opts.DoubleInterrupt <= 0 {
		opts.DoubleInterrupt = 2 * time.Second
	}
	c := &chat{
		engine: engine, opts: opts, out: out, lines: readLines(in), interrupt: interrupt,
		session: opts.SessionID, thinking: opts.ThinkingLevel, verbose: opts.Verbose,
	}
	if c.session == "" {
		if err := c.newSession(ctx); err != nil {
			return err
		}
	} else if err := c.showHistory(ctx); err != nil {
		return err
	}
	defer func() { fmt.Fprintf(out, "\nResume this chat with: penguin chat --resume %s\n", c.session) }()
	var lastInterrupt time.Time
	for {
		fmt.Fprint(out, "› ")
		select {
		case <-ctx.Done():
			return nil
		case <-c.interrupt:
			if time.Since(lastInterrupt) < opts.DoubleInterrupt {
				fmt.Fprintln(out)
				return nil
			}
			lastInterrupt = time.Now()
			fmt.Fprintln(out, "\n(press Ctrl-C again to quit)")
		case line, ok := <-c.lines:
			if !ok {
				return nil
			}
			quit, err := c.handle(ctx, strings.TrimSpace(line))
			if err != nil {
				fmt.Fprintf(out, "error: %v\n", status.Convert(err).Message())
			}
			if quit {
				return nil
			}
		}
	}
}

func (c *chat) renderer() *Renderer {
	return NewRenderer(c.out, RendererOptions{Color: c.opts.Color, Collapse: !c.verbose})
}

func (c *chat) newSession(ctx context.Context) error {
	if c.opts.NewSession == nil {
		return errors.New("no session to continue and no model to start one with")
	}
	resp, err := c.engine.CreateSession(ctx, c.opts.NewSession)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	c.session = resp.GetSession().GetSessionId()
	fmt.Fprintf(c.out, "session %s (%s/%s) in %s\n", c.session, resp.GetSession().GetModel().GetProvider(),
		resp.GetSession().GetModel().GetModelId(), resp.GetSession().GetWorkspace())
	return nil
}

// showHistory prints a resumed session's conversation, collapsed.
func (c *chat) showHistory(ctx context.Context) error {
	r := NewRenderer(c.out, RendererOptions{Color: c.opts.Color, Collapse: true})
	var after int64
	for {
		resp, err := c.engine.GetHistory(ctx, &penguinv1.GetHistoryRequest{SessionId: c.session, AfterSequence: after})
		if err != nil {
			return fmt.Errorf("read history of %s: %w", c.session, err)
		}
		for _, ev := range resp.GetEvents() {
			if t := ev.GetMessage().GetText(); t != nil && t.GetRole() == penguinv1.Role_ROLE_USER && t.GetSender() == penguinv1.Sender_SENDER_UNSPECIFIED {
				fmt.Fprintf(c.out, "› %s\n", t.GetText())
			}
			r.Event(ev)
			after = ev.GetSequence()
		}
		if !resp.GetMore() || len(resp.GetEvents()) == 0 {
			fmt.Fprintf(c.out, "— resumed session %s —\n", c.session)
			return nil
		}
	}
}

// handle acts on one line typed at the prompt and reports whether to quit.
func (c *chat) handle(ctx context.Context, line string) (bool, error) {
	cmd, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	switch {
	case line == "":
		return false, nil
	case cmd == "/exit" || cmd == "/quit":
		return true, nil
	case cmd == "/verbose":
		c.verbose = !c.verbose
		fmt.Fprintf(c.out, "verbose tool output: %v\n", c.verbose)
	case cmd == "/thinking":
		if arg == "" {
			fmt.Fprintf(c.out, "thinking level for the next turn: %s\n", levelWord(c.thinking))
			return false, nil
		}
		level, err := ParseThinkingLevel(arg)
		if err != nil {
			return false, err
		}
		c.thinking = level
		fmt.Fprintf(c.out, "thinking level set to %s for this chat\n", arg)
	case cmd == "/clear":
		return false, c.newSession(ctx)
	case cmd == "/compact":
		resp, err := c.engine.Compact(ctx, &penguinv1.CompactRequest{SessionId: c.session})
		if err != nil {
			return false, err
		}
		fmt.Fprintf(c.out, "compaction %s %s\n", enumword.Word(resp.GetStatus()), resp.GetMessage())
	case cmd == "/resume":
		return false, c.resume(ctx, arg)
	case strings.HasPrefix(cmd, "/"):
		return false, fmt.Errorf("unknown command %s (try /compact, /clear, /thinking, /resume, /verbose, /exit)", cmd)
	default:
		late, err := c.task(ctx, line)
		if err != nil {
			return false, err
		}
		// Commands typed during the task, and lines that came too late to
		// steer it, run now in the order they were typed.
		for _, next := range late {
			if quit, err := c.handle(ctx, next); quit || err != nil {
				return quit, err
			}
		}
	}
	return false, nil
}

func levelWord(l penguinv1.ThinkingLevel) string {
	if l == penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		return "the session's default"
	}
	return enumword.Word(l)
}

// resume switches to session id, or lists recent sessions when id is empty.
func (c *chat) resume(ctx context.Context, id string) error {
	if id == "" {
		resp, err := c.engine.ListSessions(ctx, &penguinv1.ListSessionsRequest{PageSize: 10})
		if err != nil {
			return err
		}
		for _, s := range resp.GetSessions() {
			fmt.Fprintf(c.out, "  %s  %s  %s\n", s.GetSessionId(), s.GetUpdatedAt().AsTime().Local().Format("2006-01-02 15:04"), s.GetTitle())
		}
		fmt.Fprintln(c.out, "resume one with /resume ID")
		return nil
	}
	prev := c.session
	c.session = id
	if err := c.showHistory(ctx); err != nil {
		c.session = prev
		return err
	}
	return nil
}

// task runs one prompt, steering with lines typed meanwhile. It returns the
// commands typed meanwhile and the lines that arrived too late to steer, in
// order, for the caller to run next.
func (c *chat) task(ctx context.Context, prompt string) ([]string, error) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.engine.Run(runCtx, &penguinv1.RunRequest{SessionId: c.session, Prompt: prompt, ThinkingLevel: c.thinking, ApprovalMode: c.opts.ApprovalMode})
	if err != nil {
		return nil, err
	}
	type received struct {
		ev  *penguinv1.RunEvent
		err error
	}
	events := make(chan received)
	go func() {
		defer close(events)
		for {
			resp, err := stream.Recv()
			select {
			case events <- received{resp.GetEvent(), err}:
			case <-runCtx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	r := c.renderer()
	var pending *penguinv1.ApprovalRequest
	var late []string
	for {
		select {
		case got, ok := <-events:
			if !ok {
				return late, nil
			}
			if got.err != nil {
				if errors.Is(got.err, io.EOF) {
					return late, nil
				}
				return nil, got.err
			}
			r.Event(got.ev)
			if req := got.ev.GetApprovalRequest(); req != nil {
				pending = req
				call := req.GetToolCall()
				fmt.Fprintf(c.out, "Allow %s %s? [Y/n] ", call.GetName(), call.GetArguments())
			}
			if s := got.ev.GetState(); s != nil && s.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
				return late, nil
			}
		case <-c.interrupt:
			if pending != nil {
				fmt.Fprintln(c.out, "n")
				c.answer(ctx, pending, penguinv1.Decision_DECISION_DENY)
				pending = nil
				continue
			}
			fmt.Fprintln(c.out, "\n(aborting)")
			if _, err := c.engine.Abort(ctx, &penguinv1.AbortRequest{SessionId: c.session, Reason: "Ctrl-C in chat"}); err != nil {
				return nil, err
			}
		case line, ok := <-c.lines:
			if !ok {
				// End of input while a task runs: let it finish.
				c.lines = nil
				continue
			}
			if pending != nil {
				c.answer(ctx, pending, parseAnswer(line))
				pending = nil
				continue
			}
			line = strings.TrimSpace(line)
			if line == "" {
				continue
			}
			if strings.HasPrefix(line, "/") {
				late = append(late, line)
				fmt.Fprintf(c.out, "(%s runs when the task ends)\n", line)
				continue
			}
			if _, err := c.engine.Steer(ctx, &penguinv1.SteerRequest{SessionId: c.session, Text: line}); err != nil {
				if status.Code(err) == codes.FailedPrecondition {
					// The task ended first: the line becomes a prompt, joined
					// to the text typed just before it.
					if n := len(late); n > 0 && !strings.HasPrefix(late[n-1], "/") {
						late[n-1] += "\n" + line
					} else {
						late = append(late, line)
					}
					continue
				}
				return nil, err
			}
			fmt.Fprintf(c.out, "» %s\n", line)
		}
	}
}

func (c *chat) answer(ctx context.Context, req *penguinv1.ApprovalRequest, d penguinv1.Decision) {
	_, err := c.engine.Approve(ctx, &penguinv1.ApproveRequest{
		SessionId: c.session, ToolCallId: req.GetToolCall().GetToolCallId(), Decision: d, Origin: req.GetOrigin(),
	})
	if err != nil {
		fmt.Fprintf(c.out, "could not answer the approval: %v\n", status.Convert(err).Message())
	}
}
