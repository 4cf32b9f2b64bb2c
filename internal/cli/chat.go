package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/penguin-agent/penguin/internal/termtext"
	"io"
	"regexp"
	"strings"
	"sync"
	"time"

	"charm.land/bubbles/v2/key"
	"charm.land/bubbles/v2/spinner"
	"charm.land/bubbles/v2/textarea"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// ChatOptions configure an interactive chat.
type ChatOptions struct {
	// SessionID continues a session; empty starts a new one from
	// NewSession when the first message is sent, so a chat left without a
	// word leaves no session behind.
	SessionID string
	// NewSession describes the sessions a fresh chat, /clear and /model
	// create.
	NewSession *penguinv1.CreateSessionRequest
	// ThinkingLevel is the initial per-turn override.
	ThinkingLevel penguinv1.ThinkingLevel
	// ApprovalMode, when set, changes the session's approval mode from the
	// chat's first task on (for a resumed session; a new one gets its mode
	// from NewSession).
	ApprovalMode penguinv1.ApprovalMode
	// Verbose shows tool outputs in full instead of collapsed.
	Verbose bool
	// Color enables styles.
	Color bool
	// HistoryFile keeps the messages typed, for Up and Down in later
	// chats; empty keeps them for this chat only.
	HistoryFile string
	// LLM lists models for /model and the context window; nil when the
	// server does not offer it.
	LLM penguinv1.LLMServiceClient
	// LogFile is where an embedded server logs, for /status.
	LogFile string
	// AgentThinking is the agent's thinking level, the default of a
	// session that sets none; unspecified when the engine is remote.
	AgentThinking penguinv1.ThinkingLevel
	// DoubleInterrupt is how soon a second Ctrl-C at an empty prompt
	// quits; zero means two seconds.
	DoubleInterrupt time.Duration
	// Width and Height fix the terminal's size, for tests without one.
	Width, Height int
}

// maxLiveLines bounds the streaming text shown above the input line; what
// is printed for good scrolls above it.
const maxLiveLines = 8

// maxInputLines is the most lines the input grows to before it scrolls.
const maxInputLines = 8

// Chat runs `penguin chat` on the terminal in and out until the user quits
// (/exit, Ctrl-D on an empty line, Ctrl-C twice at an empty prompt) or ctx
// ends, then prints how to resume the session, if one was started.
func Chat(ctx context.Context, engine penguinv1.EngineServiceClient, opts ChatOptions, in io.Reader, out io.Writer) error {
	if opts.DoubleInterrupt <= 0 {
		opts.DoubleInterrupt = 2 * time.Second
	}
	hist, err := loadHistory(opts.HistoryFile)
	if err != nil {
		fmt.Fprintf(out, "warning: chat history %s: %v\n", opts.HistoryFile, err)
	}
	m := newChatModel(ctx, engine, opts, hist)
	popts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out), tea.WithoutSignalHandler()}
	if opts.Width > 0 {
		popts = append(popts, tea.WithWindowSize(opts.Width, opts.Height))
	}
	final, err := tea.NewProgram(m, popts...).Run()
	if err != nil && !errors.Is(err, tea.ErrProgramKilled) && !errors.Is(err, context.Canceled) {
		return err
	}
	if fm, ok := final.(*chatModel); ok {
		m = fm
	}
	if m.cancel != nil {
		// Quit during a task: stop following it (it goes on in the
		// engine, and --resume shows it).
		m.cancel()
	}
	if m.err != nil {
		return m.err
	}
	if m.session != "" {
		fmt.Fprintf(out, "Resume this chat with: penguin chat --resume %s\n", m.session)
	}
	return nil
}

// chatState is what the input line is for.
type chatState int

const (
	stateIdle      chatState = iota // typing a message
	stateRunning                    // a task runs; typing steers it
	stateApproving                  // a tool call waits for y or n
	statePicking                    // a picker replaces the input
)

// chatModel is the Bubble Tea model of a chat.
type chatModel struct {
	ctx    context.Context
	engine penguinv1.EngineServiceClient
	opts   ChatOptions

	// session is the session's id, empty until the first message starts
	// one.
	session   string
	info      *penguinv1.Session
	model     *penguinv1.ModelRef
	thinking  penguinv1.ThinkingLevel
	verbose   bool
	workspace string
	// goal, set by /goal, makes the next run a goal loop.
	goal *penguinv1.GoalOptions
	// skills are the skills /skill pinned for the next message.
	skills []string
	// att holds what /image and /file attached for the next message.
	att Attachments

	state    chatState
	input    textarea.Model
	hist     *history
	spin     spinner.Model
	picker   *picker
	r        *Renderer
	printed  bytes.Buffer
	outbox   []string
	printing bool
	width    int

	// The running task.
	started time.Time
	events  <-chan runItem
	cancel  context.CancelFunc
	pending *penguinv1.ApprovalRequest
	// later holds lines to run when the task ends: commands typed during
	// it, follow-ups queued with Tab, and messages that came too late to
	// steer it, each with what was attached to it.
	later    []laterLine
	aborting bool

	lastInterrupt time.Time
	hint          string
	// err ends the chat with an error.
	err error
}

func newChatModel(ctx context.Context, engine penguinv1.EngineServiceClient, opts ChatOptions, hist *history) *chatModel {
	m := &chatModel{
		ctx: ctx, engine: engine, opts: opts, session: opts.SessionID, thinking: opts.ThinkingLevel,
		verbose: opts.Verbose, hist: hist, width: max(opts.Width, 80),
		spin: spinner.New(spinner.WithSpinner(spinnerFrames)),
	}
	if opts.NewSession != nil {
		m.model, m.workspace = opts.NewSession.GetModel(), opts.NewSession.GetWorkspace()
	}
	m.r = m.newRenderer()
	in := textarea.New()
	in.ShowLineNumbers = false
	in.Placeholder = "Send a message (/help for commands)"
	in.SetPromptFunc(2, func(p textarea.PromptInfo) string {
		if p.LineNumber == 0 {
			return "› "
		}
		return "  "
	})
	in.KeyMap.InsertNewline = key.NewBinding(key.WithKeys("alt+enter", "ctrl+j", "shift+enter"))
	st := textarea.DefaultStyles(true)
	st.Focused.CursorLine = lipgloss.NewStyle()
	st.Focused.Placeholder = lipgloss.NewStyle().Faint(true)
	in.SetStyles(st)
	in.SetHeight(1)
	in.SetWidth(m.width)
	in.CharLimit = 0
	in.MaxHeight = 0
	m.input = in
	return m
}

func (m *chatModel) newRenderer() *Renderer {
	return NewRenderer(&m.printed, RendererOptions{
		Color: m.opts.Color, Collapse: !m.verbose, Markdown: true, Width: m.width, Countdown: true,
	})
}

// Messages of the chat's own commands.
type (
	// runItem is one event of the running task's stream, or its end.
	runItem struct {
		ev  *penguinv1.RunEvent
		err error
	}
	// runStarted carries a task's event stream.
	runStarted struct {
		events <-chan runItem
		cancel context.CancelFunc
	}
	// sessionReady reports a created or resumed session.
	sessionReady struct {
		info    *penguinv1.Session
		history []*penguinv1.RunEvent
		// then is the message to send once the session exists.
		then string
	}
	// printedMsg says the print queue's last batch is on the screen.
	printedMsg struct{}
	// notice is text to print, or an error to report, from a command.
	notice struct {
		text string
		err  error
	}
	// pickerMsg opens a picker.
	pickerMsg struct{ p *picker }
	// windowMsg sets the model's context window.
	windowMsg struct{ tokens int64 }
	// resumeFailed says a session could not be resumed.
	resumeFailed struct{ err error }
)

func (m *chatModel) Init() tea.Cmd {
	cmds := []tea.Cmd{m.input.Focus(), m.contextWindow(), func() tea.Msg {
		return notice{text: strings.Join(ProviderWarnings(m.ctx, m.opts.LLM), "\n")}
	}}
	if m.session != "" {
		cmds = append(cmds, m.resume(m.session))
	} else {
		m.say(m.style(styleDim, fmt.Sprintf("penguin chat · %s · %s · /help for commands", modelName(m.model), m.workspace)))
	}
	cmds = append(cmds, m.flush())
	return tea.Batch(cmds...)
}

// say queues lines to print above the input.
func (m *chatModel) say(lines ...string) {
	m.printed.WriteString(strings.Join(lines, "\n") + "\n")
}

func (m *chatModel) style(s, text string) string {
	if !m.opts.Color {
		return text
	}
	return s + text + styleReset
}

// flush moves what was printed into the print queue and, unless a print
// is in flight, prints it. Prints go one at a time, so they keep their
// order: Bubble Tea runs commands concurrently.
func (m *chatModel) flush() tea.Cmd {
	if m.printed.Len() > 0 {
		m.outbox = append(m.outbox, strings.TrimRight(m.printed.String(), "\n"))
		m.printed.Reset()
	}
	if m.printing || len(m.outbox) == 0 {
		return nil
	}
	text := strings.Join(m.outbox, "\n")
	m.outbox, m.printing = nil, true
	return tea.Sequence(tea.Println(text), func() tea.Msg { return printedMsg{} })
}

func (m *chatModel) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	cmd := m.update(msg)
	if m.err != nil {
		return m, tea.Quit
	}
	return m, tea.Batch(cmd, m.flush())
}

func (m *chatModel) update(msg tea.Msg) tea.Cmd {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		if msg.Width > 0 && msg.Width != m.width {
			m.width = msg.Width
			m.input.SetWidth(msg.Width)
			m.r.SetWidth(msg.Width)
		}
	case printedMsg:
		m.printing = false
	case notice:
		if msg.err != nil {
			m.say(m.style(styleRed, "error: "+errorText(msg.err)))
		} else if msg.text != "" {
			m.say(msg.text)
		}
	case windowMsg:
		m.r.SetContextWindow(msg.tokens)
	case pickerMsg:
		m.picker, m.state = msg.p, statePicking
	case modelPicked:
		return m.useModel(msg.ref)
	case sessionReady:
		return m.sessionReady(msg)
	case resumeFailed:
		if m.info == nil && m.session == m.opts.SessionID && m.session != "" {
			// The session the chat was started to resume: nothing to
			// go on with.
			m.session, m.err = "", msg.err
			return nil
		}
		m.say(m.style(styleRed, "error: "+errorText(msg.err)))
	case runStarted:
		m.events, m.cancel = msg.events, msg.cancel
		return tea.Batch(m.next(), m.spin.Tick)
	case runItem:
		return m.runEvent(msg)
	case spinner.TickMsg:
		if m.state == stateRunning || m.state == stateApproving {
			var cmd tea.Cmd
			m.spin, cmd = m.spin.Update(msg)
			return cmd
		}
	case laterLine:
		// The task ended before the steering line reached it: it is the
		// next message, joined to one typed just before it.
		if m.state == stateIdle {
			m.att.add(msg.att)
			return m.handle(msg.text)
		}
		if n := len(m.later); n > 0 && !strings.HasPrefix(m.later[n-1].text, "/") {
			m.later[n-1].text += "\n" + msg.text
			m.later[n-1].att.add(msg.att)
		} else {
			m.later = append(m.later, msg)
		}
	case tea.PasteMsg:
		if m.state == stateIdle || m.state == stateRunning {
			var cmd tea.Cmd
			m.input, cmd = m.input.Update(msg)
			m.fitInput()
			return cmd
		}
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return nil
}

// key handles one key press.
func (m *chatModel) key(k tea.KeyPressMsg) tea.Cmd {
	if k.String() != "ctrl+c" {
		m.hint = ""
	}
	switch m.state {
	case statePicking:
		done, cmd := m.picker.key(k)
		if done {
			m.picker, m.state = nil, m.idleState()
		}
		return cmd
	case stateApproving:
		switch strings.ToLower(k.String()) {
		case "y", "enter":
			return m.answer(penguinv1.Decision_DECISION_ALLOW)
		case "n", "ctrl+c", "esc":
			return m.answer(penguinv1.Decision_DECISION_DENY)
		}
		return nil
	}
	switch k.String() {
	case "ctrl+c":
		return m.interrupt()
	case "ctrl+d":
		if m.input.Value() == "" && m.state == stateIdle {
			return tea.Quit
		}
	case "enter":
		return m.submit()
	case "tab":
		if m.state == stateRunning {
			return m.queue()
		}
	case "alt+up":
		if m.state == stateRunning && m.input.Value() == "" {
			m.recall()
			return nil
		}
	case "up":
		if m.input.Line() == 0 {
			if s, ok := m.hist.prev(m.input.Value()); ok {
				m.setInput(s)
				m.input.MoveToBegin()
			}
			return nil
		}
	case "down":
		if m.input.Line() == m.input.LineCount()-1 {
			if s, ok := m.hist.next(); ok {
				m.setInput(s)
			}
			return nil
		}
	}
	var cmd tea.Cmd
	m.input, cmd = m.input.Update(k)
	m.fitInput()
	return cmd
}

// idleState is the state after a picker closes.
func (m *chatModel) idleState() chatState {
	if m.events != nil {
		return stateRunning
	}
	return stateIdle
}

func (m *chatModel) setInput(s string) {
	m.input.SetValue(s)
	m.fitInput()
}

// fitInput grows the input with its lines, up to maxInputLines.
func (m *chatModel) fitInput() {
	m.input.SetHeight(min(max(m.input.LineCount(), 1), maxInputLines))
}

// interrupt is Ctrl-C outside approvals and pickers: it aborts a running
// task, clears a half-typed line, and at an empty prompt quits when
// pressed twice.
func (m *chatModel) interrupt() tea.Cmd {
	switch {
	case m.state == stateRunning && m.input.Value() == "":
		if m.aborting {
			return nil
		}
		m.aborting = true
		m.say(m.style(styleDim, "(aborting)"))
		id := m.session
		return func() tea.Msg {
			_, err := m.engine.Abort(context.WithoutCancel(m.ctx), &penguinv1.AbortRequest{SessionId: id, Reason: "you pressed Ctrl-C"})
			return notice{err: err}
		}
	case m.input.Value() != "":
		m.setInput("")
		return nil
	case time.Since(m.lastInterrupt) < m.opts.DoubleInterrupt:
		return tea.Quit
	}
	m.lastInterrupt = time.Now()
	m.hint = "press Ctrl-C again to quit"
	return nil
}

// submit sends the input line: a command, a steering message while a task
// runs, or a new task.
func (m *chatModel) submit() tea.Cmd {
	text := m.input.Value()
	if strings.HasSuffix(text, "\\") {
		// A trailing backslash continues the message on a new line.
		m.setInput(strings.TrimSuffix(text, "\\") + "\n")
		return nil
	}
	text = strings.TrimRight(text, " \t\n")
	if strings.TrimSpace(text) == "" {
		return nil
	}
	m.setInput("")
	if err := m.hist.add(text); err != nil {
		m.say(m.style(styleDim, "warning: chat history: "+err.Error()))
	}
	if m.state == stateRunning {
		if name, arg, _ := strings.Cut(text, " "); name == "/image" || name == "/file" {
			// Attaching sends nothing: it acts now, for the steering
			// message or follow-up typed next.
			m.attach(name, strings.TrimSpace(arg))
			return nil
		}
		if strings.HasPrefix(text, "/") {
			m.later = append(m.later, laterLine{text: text})
			m.say(m.style(styleDim, "("+text+" runs when the task ends)"))
			return nil
		}
		return m.steer(text)
	}
	return m.handle(text)
}

// laterLine is a line that waits for the running task to end, with what
// was attached to it.
type laterLine struct {
	text string
	att  Attachments
	// queued marks a follow-up queued with Tab, which Alt-Up recalls.
	queued bool
}

// queue keeps the input line, with the attachments, as a follow-up sent
// when the task ends; Alt-Up recalls it before that.
func (m *chatModel) queue() tea.Cmd {
	text := strings.TrimRight(m.input.Value(), " \t\n")
	if strings.TrimSpace(text) == "" {
		return nil
	}
	m.setInput("")
	if err := m.hist.add(text); err != nil {
		m.say(m.style(styleDim, "warning: chat history: "+err.Error()))
	}
	m.later = append(m.later, laterLine{text: text, att: m.att, queued: true})
	m.att = Attachments{}
	return nil
}

// recall takes the last queued follow-up back into the input line (and
// its attachments back to the next message), to edit or send as steering.
func (m *chatModel) recall() {
	for i := len(m.later) - 1; i >= 0; i-- {
		if l := m.later[i]; l.queued {
			m.later = append(m.later[:i], m.later[i+1:]...)
			m.att.add(l.att)
			m.setInput(l.text)
			return
		}
	}
}

// handle acts on one line at an idle prompt.
func (m *chatModel) handle(line string) tea.Cmd {
	if strings.HasPrefix(line, "/") {
		return m.command(line)
	}
	m.say(m.style(styleBold, UserLine(line)))
	if m.session == "" {
		return m.create(line)
	}
	return m.run(line)
}

// View draws the live area: the text streaming now, the status line, and
// the input (or the approval question, or a picker).
func (m *chatModel) View() tea.View {
	var b strings.Builder
	if m.state == stateRunning || m.state == stateApproving {
		if p := m.r.Pending(); p != "" {
			lines := strings.Split(p, "\n")
			if len(lines) > maxLiveLines {
				lines = lines[len(lines)-maxLiveLines:]
			}
			b.WriteString(strings.Join(lines, "\n") + "\n")
		}
		b.WriteString(m.statusLine() + "\n")
		for _, l := range m.later {
			if l.queued {
				first, _, more := strings.Cut(l.text, "\n")
				if more || len(l.att.Names()) > 0 {
					first += " …"
				}
				b.WriteString(m.style(styleDim, "⏵ queued: "+first+" (Alt-Up edits)") + "\n")
			}
		}
	}
	switch m.state {
	case stateApproving:
		b.WriteString(m.style(styleBold+styleYellow, "Allow? [Y/n] "))
	case statePicking:
		b.WriteString(m.picker.view())
	default:
		b.WriteString(m.input.View())
		if m.hint != "" {
			b.WriteString("\n" + m.style(styleDim, m.hint))
		}
	}
	return tea.NewView(b.String())
}

// statusLine says what the task is doing, for how long, with how many
// tokens; during a retry wait it is the countdown.
func (m *chatModel) statusLine() string {
	return statusText(m.r.Activity(), m.started, m.spin.View(), m.aborting, m.opts.Color)
}

// modelName is provider/model, or what stands for no model.
func modelName(m *penguinv1.ModelRef) string {
	if m == nil {
		return "the agent's default model"
	}
	return m.GetProvider() + "/" + m.GetModelId()
}

// rpcWrapping is how gRPC prefixes a status's message in its error text.
var rpcWrapping = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`rpc error: code = \w+ desc = `) })

// errorText is an error as a person reads it: without gRPC's wrapping.
func errorText(err error) string {
	return termtext.Clean(rpcWrapping().ReplaceAllString(err.Error(), ""))
}
