package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// This file is the chat's engine side: starting and resuming sessions,
// running a task and following its events, answering approvals, steering.

// create starts the chat's session, then sends first.
func (m *chatModel) create(first string) tea.Cmd {
	if m.opts.NewSession == nil {
		m.say(m.style(styleRed, "error: no session to continue and no model to start one with"))
		return nil
	}
	req := m.opts.NewSession
	req.Model = m.model
	m.state = stateRunning
	m.started = time.Now()
	return func() tea.Msg {
		resp, err := m.engine.CreateSession(m.ctx, req)
		if err != nil {
			return runItem{err: fmt.Errorf("create session: %w", err)}
		}
		return sessionReady{info: resp.GetSession(), then: first}
	}
}

// resume switches to session id and shows its conversation so far.
func (m *chatModel) resume(id string) tea.Cmd {
	return func() tea.Msg {
		s, err := m.engine.GetSession(m.ctx, &penguinv1.GetSessionRequest{SessionId: id})
		if err != nil {
			return resumeFailed{fmt.Errorf("resume %s: %w", id, err)}
		}
		var evs []*penguinv1.RunEvent
		var after int64
		for {
			resp, err := m.engine.GetHistory(m.ctx, &penguinv1.GetHistoryRequest{SessionId: id, AfterSequence: after})
			if err != nil {
				return resumeFailed{fmt.Errorf("read the history of %s: %w", id, err)}
			}
			evs = append(evs, resp.GetEvents()...)
			if n := len(resp.GetEvents()); n > 0 {
				after = resp.GetEvents()[n-1].GetSequence()
			}
			if !resp.GetMore() || len(resp.GetEvents()) == 0 {
				return sessionReady{info: s.GetSession(), history: evs}
			}
		}
	}
}

func (m *chatModel) sessionReady(msg sessionReady) tea.Cmd {
	m.info = msg.info
	m.session = msg.info.GetSessionId()
	m.model, m.workspace = msg.info.GetModel(), msg.info.GetWorkspace()
	if msg.then != "" {
		m.say(m.style(styleDim, fmt.Sprintf("session %s (%s) in %s", m.session, modelName(m.model), m.workspace)))
		m.state = stateIdle
		return m.run(msg.then)
	}
	// A resumed conversation, collapsed, with labels for the engine's
	// own messages.
	hr := NewRenderer(&m.printed, RendererOptions{Color: m.opts.Color, Collapse: true, Markdown: true, Width: m.width, Countdown: true})
	for _, ev := range msg.history {
		if t := ev.GetMessage().GetText(); t != nil && t.GetRole() == penguinv1.Role_ROLE_USER && t.GetSender() == penguinv1.Sender_SENDER_UNSPECIFIED {
			if line := UserLine(t.GetText()); line != "" {
				m.say(m.style(styleBold, line))
			}
		}
		hr.Event(ev)
	}
	m.r.usage = hr.usage
	m.say(m.style(styleDim, fmt.Sprintf("— resumed session %s (%s) in %s —", m.session, modelName(m.model), m.workspace)))
	return m.contextWindow()
}

// run starts a task with prompt.
func (m *chatModel) run(prompt string) tea.Cmd {
	m.state, m.started, m.aborting = stateRunning, time.Now(), false
	m.r.StartTask()
	req := &penguinv1.RunRequest{
		SessionId: m.session, Prompt: m.att.Prompt(prompt), Images: m.att.Images,
		ThinkingLevel: m.thinking, ApprovalMode: m.opts.ApprovalMode, Goal: m.goal,
		Skills: m.skills,
	}
	m.goal, m.att, m.skills = nil, Attachments{}, nil
	return func() tea.Msg {
		// The stream outlives a cancelled chat context long enough to
		// show an abort; it ends when the task does.
		ctx, cancel := context.WithCancel(context.WithoutCancel(m.ctx))
		stream, err := m.engine.Run(ctx, req)
		if err != nil {
			cancel()
			return runItem{err: err}
		}
		ch := make(chan runItem, 64)
		go func() {
			defer close(ch)
			// send gives up once the stream is cancelled (the chat ended),
			// so this goroutine never outlives it.
			send := func(it runItem) bool {
				select {
				case ch <- it:
					return true
				case <-ctx.Done():
					return false
				}
			}
			for {
				resp, err := stream.Recv()
				if err != nil {
					if !errors.Is(err, io.EOF) {
						send(runItem{err: err})
					}
					return
				}
				if !send(runItem{ev: resp.GetEvent()}) {
					return
				}
			}
		}()
		return runStarted{events: ch, cancel: cancel}
	}
}

// next waits for the running task's next event.
func (m *chatModel) next() tea.Cmd {
	ch := m.events
	return func() tea.Msg {
		it, ok := <-ch
		if !ok {
			return runItem{}
		}
		return it
	}
}

// runEvent renders one event of the running task.
func (m *chatModel) runEvent(it runItem) tea.Cmd {
	if it.err != nil || it.ev == nil {
		if it.err != nil {
			m.say(m.style(styleRed, "error: "+errorText(it.err)))
		}
		return m.taskEnded()
	}
	ev := it.ev
	m.r.Event(ev)
	if req := ev.GetApprovalRequest(); req != nil {
		m.pending, m.state = req, stateApproving
		m.say(m.r.ApprovalPrompt(req)...)
	}
	if s := ev.GetState(); s != nil && s.GetState() == penguinv1.SessionState_SESSION_STATE_IDLE {
		return m.taskEnded()
	}
	return m.next()
}

// taskEnded returns to the prompt and runs what was typed meanwhile.
func (m *chatModel) taskEnded() tea.Cmd {
	if m.cancel != nil {
		m.cancel()
	}
	m.events, m.cancel, m.pending, m.state, m.aborting = nil, nil, nil, stateIdle, false
	later := m.later
	m.later = nil
	var cmds []tea.Cmd
	for i, line := range later {
		m.att.add(line.att)
		cmds = append(cmds, m.handle(line.text))
		if m.state != stateIdle {
			// A task started: the rest waits for its end.
			m.later = append(m.later, later[i+1:]...)
			break
		}
	}
	return tea.Batch(cmds...)
}

// answer sends the decision on the pending approval.
func (m *chatModel) answer(d penguinv1.Decision) tea.Cmd {
	req := m.pending
	m.pending, m.state = nil, stateRunning
	m.r.Answered(d == penguinv1.Decision_DECISION_ALLOW)
	word := "allowed"
	if d != penguinv1.Decision_DECISION_ALLOW {
		word = "denied"
	}
	m.say(m.style(styleDim, "  ("+word+")"))
	id := m.session
	return func() tea.Msg {
		_, err := m.engine.Approve(context.WithoutCancel(m.ctx), &penguinv1.ApproveRequest{
			SessionId: id, ToolCallId: req.GetToolCall().GetToolCallId(), Decision: d, Origin: req.GetOrigin(),
		})
		if err != nil {
			return notice{err: fmt.Errorf("could not answer the approval: %w", err)}
		}
		return nil
	}
}

// steer sends text, with what is attached, to the running task; when the
// task ended first, the text and the attachments become the next message.
func (m *chatModel) steer(text string) tea.Cmd {
	id, att := m.session, m.att
	m.att = Attachments{}
	return func() tea.Msg {
		_, err := m.engine.Steer(m.ctx, &penguinv1.SteerRequest{SessionId: id, Text: att.Prompt(text), Images: att.Images})
		switch {
		case status.Code(err) == codes.FailedPrecondition:
			return laterLine{text: text, att: att}
		case err != nil:
			return notice{err: err}
		}
		line := "» " + text
		if names := att.Names(); len(names) > 0 {
			line += " (with " + strings.Join(names, ", ") + ")"
		}
		return notice{text: m.style(styleDim, line)}
	}
}

// contextWindow looks up the model's context window for the usage line.
func (m *chatModel) contextWindow() tea.Cmd {
	model, llm := m.model, m.opts.LLM
	if model == nil || llm == nil {
		return nil
	}
	return func() tea.Msg {
		resp, err := llm.ListModels(m.ctx, &penguinv1.ListModelsRequest{Provider: model.GetProvider()})
		if err != nil {
			return nil
		}
		for _, info := range resp.GetModels() {
			if info.GetModel().GetModelId() == model.GetModelId() {
				return windowMsg{tokens: info.GetContextWindow()}
			}
		}
		return nil
	}
}
