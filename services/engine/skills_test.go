package engine_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/enginetest"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// A task that names skills sends the model its message behind a
// [use_skills] block ("skills: a, b"); a name that is not an
// enabled skill of the session's agent is refused, naming it, before
// anything is recorded or asked of the model.
func TestRunWithSkills(t *testing.T) {
	e := newEnv(t)
	for path, text := range map[string]string{
		"skills/lint/SKILL.md":          "---\nname: lint\ndescription: Lint Go code.\n---\nRun go vet.\n",
		"skills/review/SKILL.md":        "---\ndescription: Review a change.\n---\nRead the diff.\n",
		"skills/.disabled/old/SKILL.md": "---\ndescription: An old skill.\n---\nOld.\n",
	} {
		p := filepath.Join(e.agentDir, path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.llm.Generate = fake.Script(fake.NewReply().Text("linted").Done(), fake.NewReply().Text("what for?").Done())
	id := e.create(allowAll)

	// lastUserText is the text of the model's last request's newest message.
	lastUserText := func() string {
		t.Helper()
		reqs := e.llm.Requests()
		msgs := reqs[len(reqs)-1].GetNewMessages()
		var text string
		for _, m := range msgs {
			if tx := m.GetText(); tx != nil {
				text = tx.GetText()
			}
		}
		return text
	}

	evs := e.run(id, "check main.go", func(r *penguinv1.RunRequest) { r.Skills = []string{"review", "lint"} })
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	want := "[use_skills]\nskills: review, lint\n[/use_skills]\n\ncheck main.go"
	if got := lastUserText(); got != want {
		t.Fatalf("the model got %q, want %q", got, want)
	}
	if !enginetest.HasText(enginetest.Messages(history(t, e, id)), want) {
		t.Fatal("the log does not hold the message with its block")
	}
	if sp := e.llm.Requests()[0].GetSystemPrompt(); !strings.Contains(sp, "[use_skills]") || !strings.Contains(sp, "- lint: Lint Go code.") {
		t.Fatalf("the system prompt does not say what the block asks or list the skill:\n%s", sp)
	}
	got, err := e.client.GetSession(e.ctx(), &penguinv1.GetSessionRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if got.GetSession().GetTitle() != "check main.go" {
		t.Fatalf("the title is %q, not the person's words", got.GetSession().GetTitle())
	}

	// Skills and no text: the block alone, and the model asks what for.
	evs = e.run(id, "", func(r *penguinv1.RunRequest) { r.Skills = []string{"lint"} })
	if st := end(t, evs); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	if got := lastUserText(); got != "[use_skills]\nskills: lint\n[/use_skills]" {
		t.Fatalf("the model got %q", got)
	}

	before := len(history(t, e, id))
	asked := len(e.llm.Requests())
	for _, tc := range []struct {
		skills []string
		prompt string
		want   []string
	}{
		{[]string{"lint", "nope"}, "go", []string{"skills[1]", `no skill "nope" is installed`, "lint, review"}},
		{[]string{"old"}, "go", []string{"skills[0]", `"old" is disabled`}},
		{[]string{"../lint"}, "go", []string{"skills[0]", "not a skill name"}},
		{[]string{""}, "go", []string{"skills[0]", "not a skill name"}},
		{[]string{"lint", "lint"}, "go", []string{"skills[1]", "named twice"}},
		{nil, "  ", []string{"the prompt is empty"}},
	} {
		stream, err := e.client.Run(e.ctx(), &penguinv1.RunRequest{SessionId: id, Prompt: tc.prompt, Skills: tc.skills})
		if err == nil {
			_, err = enginetest.Collect(stream)
		}
		if status.Code(err) != codes.InvalidArgument {
			t.Fatalf("skills %q: %v, want InvalidArgument", tc.skills, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(status.Convert(err).Message(), w) {
				t.Errorf("skills %q: %q does not say %q", tc.skills, status.Convert(err).Message(), w)
			}
		}
	}
	if n := len(history(t, e, id)); n != before {
		t.Fatalf("refused tasks wrote %d events", n-before)
	}
	if n := len(e.llm.Requests()); n != asked {
		t.Fatalf("refused tasks asked the model %d times", n-asked)
	}
}

// A project's settings of a model reach its sessions: the context window
// in the session's meta and in every request to the model, and the price
// with the request, for the gateway to compute the cost with.
func TestProjectModelSettingsReachTheModel(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx()
	if err := e.store.PutModelSetting(ctx, &store.ModelSetting{Project: store.DefaultProject, Provider: "fake", ModelID: "m1",
		ContextWindow: 32768, Price: &store.Price{Input: 2, Output: 4}}); err != nil {
		t.Fatal(err)
	}
	e.llm.Generate = fake.Script(fake.NewReply().Text("ok").Done())
	id := e.create(allowAll)
	if w := history(t, e, id)[0].GetMessage().GetSessionMeta().GetModelContextWindow(); w != 32768 {
		t.Fatalf("the session's window is %d, not the project's", w)
	}
	if st := end(t, e.run(id, "hi")); st.GetStatus() != completedS {
		t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
	}
	req := e.llm.Requests()[0]
	if req.GetContextWindow() != 32768 || req.GetPrice().GetInput() != 2 || req.GetPrice().GetOutput() != 4 {
		t.Fatalf("the request carries window %d and price %v, not the project's", req.GetContextWindow(), req.GetPrice())
	}
}

// A change of a project's settings of a model, made by another replica
// or a command on the same store between two runs, holds at the very
// next run: the run reads them with the session's row (SQLite's
// PeekLease), nothing keeps them.
func TestProjectModelSettingsChangeHoldsAtTheNextRun(t *testing.T) {
	e := newEnv(t)
	ctx := e.ctx()
	put := func(input float64) {
		t.Helper()
		if err := e.store.PutModelSetting(ctx, &store.ModelSetting{Project: store.DefaultProject, Provider: "fake", ModelID: "m1",
			Price: &store.Price{Input: input, Output: 4}}); err != nil {
			t.Fatal(err)
		}
	}
	put(2)
	e.llm.Generate = fake.Script(fake.NewReply().Text("ok").Done(), fake.NewReply().Text("ok").Done(), fake.NewReply().Text("ok").Done())
	id := e.create(allowAll)
	run := func(want float64, has bool) {
		t.Helper()
		asked := len(e.llm.Requests())
		if st := end(t, e.run(id, "hi")); st.GetStatus() != completedS {
			t.Fatalf("ended %v: %s", st.GetStatus(), st.GetMessage())
		}
		req := e.llm.Requests()[asked]
		if (req.GetPrice() != nil) != has || req.GetPrice().GetInput() != want {
			t.Fatalf("the request carries price %v, want input %v (set: %v)", req.GetPrice(), want, has)
		}
	}
	run(2, true)
	put(3)
	run(3, true)
	if err := e.store.DeleteModelSetting(ctx, store.DefaultProject, "fake", "m1"); err != nil {
		t.Fatal(err)
	}
	run(0, false)
}
