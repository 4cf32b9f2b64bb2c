package cli

import (
	"fmt"
	"github.com/penguin-agent/penguin/internal/termtext"
	"slices"
	"strings"

	tea "charm.land/bubbletea/v2"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/enumword"
	"github.com/penguin-agent/penguin/internal/goal"
)

// chatHelp is what /help prints.
const chatHelp = `Commands:
  /help               this help
  /model              pick the model (a new session, if this one has begun)
  /thinking [LEVEL]   show or set the thinking level: none, low, medium, high, xhigh, max
  /approval [MODE]    show or set the session's approval mode: allow-all, read-only, always-ask, deny-all
  /status             the session, model, workspace, settings and usage
  /cost               tokens, cost and context use so far
  /compact            compact the context now
  /changes            list what this session's turns changed in the workspace
  /diff [SEQ]         show the last turn's change of the workspace (or change SEQ) as a diff
  /undo [SEQ] [--force] restore the files the last turn changed (or change SEQ); --force overwrites later edits
  /redo [SEQ]         redo the last undone change
  /image PATH         attach an image (PNG, JPEG, GIF, WebP; at most 5 MiB) to your next message (a model
                      without vision gets it as a file in the session's scratchpad)
  /file PATH          put a text file (at most 256 KiB) into your next message
  /skill [NAME...]    pin skills of the agent for your next message ([use_skills]); no name lists them, /skill - drops them
  /goal[:BUDGET] TEXT run TEXT as a goal, in rounds until it is complete or blocked (BUDGET: 500k, 2m; none: unlimited)
  /clear              start a fresh session (this one can be resumed)
  /resume [ID]        pick a session of this workspace, or resume ID
  /verbose            show tool outputs in full, or collapsed again
  /exit, /quit        quit (so does Ctrl-D on an empty line)
Keys:
  Enter sends; Alt-Enter, Ctrl-J or a trailing \ starts a new line; a paste is one message.
  Up and Down recall earlier messages.
  While a task runs: Enter steers it; Tab queues the message as a follow-up sent when the
  task ends, and Alt-Up takes the last queued one back to edit; /image and /file attach to
  the steering message or follow-up typed next.
  Ctrl-C denies an approval, aborts a task, clears the line, and quits when pressed twice.`

// command runs a slash command at an idle prompt.
func (m *chatModel) command(line string) tea.Cmd {
	name, arg, _ := strings.Cut(line, " ")
	arg = strings.TrimSpace(arg)
	if name == "/goal" || strings.HasPrefix(name, "/goal:") {
		return m.goalCmd(strings.TrimPrefix(strings.TrimPrefix(name, "/goal"), ":"), arg)
	}
	switch name {
	case "/exit", "/quit":
		return tea.Quit
	case "/help":
		m.say(chatHelp)
	case "/verbose":
		m.verbose = !m.verbose
		m.r.SetCollapse(!m.verbose)
		if m.verbose {
			m.say("tool outputs are shown in full")
		} else {
			m.say("long tool outputs are collapsed")
		}
	case "/thinking":
		return m.thinkingCmd(arg)
	case "/approval":
		return m.approvalCmd(arg)
	case "/status":
		m.say(m.statusReport()...)
	case "/cost":
		if line := m.r.UsageLine(); line != "" {
			m.say(line)
		} else {
			m.say("no tokens used yet")
		}
	case "/clear":
		m.session, m.info = "", nil
		m.r = m.newRenderer()
		m.say("a fresh session starts with your next message")
	case "/compact":
		if m.session == "" {
			m.say("nothing to compact yet")
			return nil
		}
		id := m.session
		m.say(m.style(styleDim, "… compacting the context"))
		return func() tea.Msg {
			resp, err := m.engine.Compact(m.ctx, &penguinv1.CompactRequest{SessionId: id})
			if err != nil {
				return notice{err: err}
			}
			return notice{text: strings.TrimSpace("compaction " + enumword.Word(resp.GetStatus()) + " " + resp.GetMessage())}
		}
	case "/image", "/file":
		m.attach(name, arg)
	case "/skill":
		m.skillCmd(arg)
	case "/changes", "/diff", "/undo", "/redo":
		return m.workspaceCmd(strings.TrimPrefix(name, "/"), arg)
	case "/model":
		return m.pickModel()
	case "/resume":
		if arg != "" {
			return m.resume(arg)
		}
		return m.pickSession()
	default:
		m.say(m.style(styleRed, "unknown command "+name+" (/help lists them)"))
	}
	return nil
}

// attach adds the image or text file at path to the next message.
func (m *chatModel) attach(cmd, path string) {
	if path == "" {
		m.say(m.style(styleRed, cmd+" needs a path: "+cmd+" PATH"))
		return
	}
	add := m.att.AddImage
	if cmd == "/file" {
		add = m.att.AddFile
	}
	if err := add(expandHome(path)); err != nil {
		m.say(m.style(styleRed, cmd+": "+err.Error()))
		return
	}
	m.say(m.style(styleDim, "attached "+strings.Join(m.att.Names(), ", ")+"; they go with your next message"))
}

// skillCmd pins skills for the next message, or shows or drops those
// pinned. The engine checks the names when the message is sent: an
// unknown or disabled skill is refused there, naming it.
func (m *chatModel) skillCmd(arg string) {
	switch names := strings.Fields(arg); {
	case len(names) == 0 && len(m.skills) == 0:
		m.say("no skills pinned; /skill NAME pins one for your next message")
	case len(names) == 0:
		m.say("pinned for your next message: " + strings.Join(m.skills, ", "))
	case arg == "-":
		m.skills = nil
		m.say("no skills pinned")
	default:
		for _, n := range names {
			if !slices.Contains(m.skills, n) {
				m.skills = append(m.skills, n)
			}
		}
		m.say(m.style(styleDim, "pinned "+strings.Join(m.skills, ", ")+"; they go with your next message"))
	}
}

// goalCmd starts a goal loop with objective, within budget (empty:
// unlimited): `/goal[:budget] objective`.
func (m *chatModel) goalCmd(budget, objective string) tea.Cmd {
	n, err := goal.ParseBudget(budget)
	if err != nil {
		m.say(m.style(styleRed, "/goal: "+err.Error()))
		return nil
	}
	if objective == "" {
		m.say(m.style(styleRed, "/goal needs an objective: /goal[:budget] objective, for example /goal:500k make all tests pass"))
		return nil
	}
	m.goal = &penguinv1.GoalOptions{Budget: n}
	m.say(m.style(styleBold, UserLine(objective)))
	if m.session == "" {
		return m.create(objective)
	}
	return m.run(objective)
}

// thinkingCmd shows the thinking level the next turn runs at, and whose it
// is, or sets an override for this chat.
func (m *chatModel) thinkingCmd(arg string) tea.Cmd {
	// The default and whose it is: the session's, the new session's (not
	// created yet), or the agent's.
	unset := penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED
	def, whose := unset, "the agent's default"
	switch {
	case m.info.GetThinkingLevel() != unset:
		def, whose = m.info.GetThinkingLevel(), "this session's default"
	case m.info == nil && m.opts.NewSession.GetThinkingLevel() != unset:
		def, whose = m.opts.NewSession.GetThinkingLevel(), "the new session's default"
	case m.opts.AgentThinking != unset:
		def = m.opts.AgentThinking
	}
	if arg == "" {
		switch {
		case m.thinking != unset && def != unset:
			m.say(fmt.Sprintf("thinking level for the next turn: %s, set for this chat (%s is %s)", enumword.Word(m.thinking), whose, enumword.Word(def)))
		case m.thinking != unset:
			m.say(fmt.Sprintf("thinking level for the next turn: %s, set for this chat", enumword.Word(m.thinking)))
		case def != unset:
			m.say(fmt.Sprintf("thinking level for the next turn: %s, %s", enumword.Word(def), whose))
		default:
			m.say("thinking level for the next turn: " + whose)
		}
		return nil
	}
	level, err := ParseThinkingLevel(arg)
	if err != nil {
		m.say(m.style(styleRed, err.Error()))
		return nil
	}
	m.thinking = level
	m.say(fmt.Sprintf("thinking level set to %s for this chat", enumword.Word(level)))
	return nil
}

// statusReport is what /status prints.
func (m *chatModel) statusReport() []string {
	session := m.session
	if session == "" {
		session = "none yet (your first message starts one)"
	}
	thinking := "the session's default"
	if m.thinking != penguinv1.ThinkingLevel_THINKING_LEVEL_UNSPECIFIED {
		thinking = enumword.Word(m.thinking) + " (set for this chat)"
	}
	approval := m.approvalMode()
	lines := []string{
		"session:   " + session,
		"model:     " + modelName(m.model),
		"workspace: " + m.workspace,
		"approval:  " + strings.ReplaceAll(enumword.Word(approval), "_", "-"),
		"thinking:  " + thinking,
		fmt.Sprintf("verbose:   %v", m.verbose),
	}
	if u := m.r.UsageLine(); u != "" {
		lines = append(lines, "usage:     "+u)
	}
	if m.opts.LogFile != "" {
		lines = append(lines, "log:       "+m.opts.LogFile)
	}
	return lines
}

// pickModel lists the models the server knows and switches to the one
// picked: for the session to come, or, once the session has begun (a
// session keeps its model), for a new one.
func (m *chatModel) pickModel() tea.Cmd {
	if m.opts.LLM == nil {
		m.say(m.style(styleRed, "this server offers no model list"))
		return nil
	}
	return func() tea.Msg {
		resp, err := m.opts.LLM.ListModels(m.ctx, &penguinv1.ListModelsRequest{})
		if err != nil {
			return notice{err: fmt.Errorf("list models: %w", err)}
		}
		if len(resp.GetModels()) == 0 {
			return notice{text: "the server lists no models: its providers are not in the model catalog (penguin models lists it); start the chat with --provider and --model"}
		}
		p := &picker{title: "model"}
		for _, info := range resp.GetModels() {
			ref := info.GetModel()
			label := modelName(ref)
			if w := info.GetContextWindow(); w > 0 {
				label += fmt.Sprintf("  (%s context)", count(w))
			}
			p.items = append(p.items, pickItem{label: label, value: ref.GetProvider() + "\x00" + ref.GetModelId()})
		}
		p.pick = func(it pickItem) tea.Cmd {
			provider, id, _ := strings.Cut(it.value, "\x00")
			return func() tea.Msg { return modelPicked{&penguinv1.ModelRef{Provider: provider, ModelId: id}} }
		}
		return pickerMsg{p}
	}
}

// modelPicked is the model /model chose.
type modelPicked struct{ ref *penguinv1.ModelRef }

// useModel switches the chat to ref.
func (m *chatModel) useModel(ref *penguinv1.ModelRef) tea.Cmd {
	m.model = ref
	if m.session != "" {
		old := m.session
		m.session, m.info = "", nil
		m.r = m.newRenderer()
		m.say(fmt.Sprintf("model: %s; a session keeps its model, so your next message starts a new one (resume the old one with /resume %s)", modelName(ref), old))
	} else {
		m.say("model: " + modelName(ref))
	}
	return m.contextWindow()
}

// pickSession lists this workspace's sessions, newest first, to resume one.
func (m *chatModel) pickSession() tea.Cmd {
	ws := m.workspace
	return func() tea.Msg {
		p := &picker{title: "session in " + ws}
		token := ""
		for pages := 0; pages < 20 && len(p.items) < 200; pages++ {
			resp, err := m.engine.ListSessions(m.ctx, &penguinv1.ListSessionsRequest{PageToken: token})
			if err != nil {
				return notice{err: fmt.Errorf("list sessions: %w", err)}
			}
			for _, s := range resp.GetSessions() {
				if s.GetWorkspace() != ws || s.GetParentSessionId() != "" || s.GetSource() == "subagent" {
					continue
				}
				label := termtext.Clean(fmt.Sprintf("%s  %s  %s  %s", s.GetUpdatedAt().AsTime().Local().Format("2006-01-02 15:04"),
					s.GetSessionId(), s.GetWorkspace(), clip(firstLine(s.GetTitle()), 50)))
				p.items = append(p.items, pickItem{label: label, value: s.GetSessionId()})
			}
			if token = resp.GetNextPageToken(); token == "" {
				break
			}
		}
		if len(p.items) == 0 {
			return notice{text: "no sessions in " + ws + " yet (penguin sessions lists every workspace's)"}
		}
		p.pick = func(it pickItem) tea.Cmd { return m.resume(it.value) }
		return pickerMsg{p}
	}
}

// workspaceCmd runs /changes, /diff, /undo and /redo on the session.
func (m *chatModel) workspaceCmd(verb, arg string) tea.Cmd {
	if m.session == "" {
		m.say("no turn of this session has changed the workspace yet")
		return nil
	}
	id := m.session
	return func() tea.Msg {
		text, err := workspaceVerb(m.ctx, m.engine, verb, id, strings.Fields(arg))
		if err != nil {
			return notice{err: err}
		}
		return notice{text: text}
	}
}

// approvalMode is the approval mode the session runs at: what this chat
// set, else the session's, else what the new session is to get.
func (m *chatModel) approvalMode() penguinv1.ApprovalMode {
	mode := m.info.GetApprovalMode()
	if m.opts.ApprovalMode != penguinv1.ApprovalMode_APPROVAL_MODE_UNSPECIFIED {
		mode = m.opts.ApprovalMode
	} else if m.info == nil {
		mode = m.opts.NewSession.GetApprovalMode()
	}
	return mode
}

// approvalCmd shows or sets the approval mode. Set, it is the session's
// from now on (UpdateSession), and every later task of this chat runs
// at it.
func (m *chatModel) approvalCmd(arg string) tea.Cmd {
	if arg == "" {
		m.say("approval mode: " + strings.ReplaceAll(enumword.Word(m.approvalMode()), "_", "-"))
		return nil
	}
	mode, err := ParseApprovalMode(arg)
	if err != nil {
		m.say(m.style(styleRed, err.Error()))
		return nil
	}
	m.opts.ApprovalMode = mode
	done := "approval mode set to " + arg
	if m.session == "" {
		m.say(done + " for the new session")
		return nil
	}
	id := m.session
	return func() tea.Msg {
		if _, err := m.engine.UpdateSession(m.ctx, &penguinv1.UpdateSessionRequest{SessionId: id, ApprovalMode: &mode}); err != nil {
			return notice{err: err}
		}
		return notice{text: done}
	}
}
