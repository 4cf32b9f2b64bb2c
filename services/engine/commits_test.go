package engine_test

import (
	"testing"
	"time"

	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// commitsPerTask is what a task of the end-to-end benchmark's shape
// commits: the new session with its session_meta; the lease with the
// prompt, the tool list and the title; the first request's events with
// the environment's binding; the tool's output with the second request's
// start; the second request's events with the row and the lease's
// release.
const commitsPerTask = 5

// A task (a new session, then a Run of two model turns and one tool call)
// commits at most commitsPerTask transactions. Before the lease was taken
// with the prompt it committed 6: the lease had a commit of its own. The
// fewest of three tasks is taken: a first model turn that outlasts the
// journal's linger on a loaded machine commits its request's start apart,
// and the linger is long here so that a slow run (-race) does not either.
func TestTaskCommits(t *testing.T) {
	e := newEnv(t, func(o *session.Options) { o.LogLinger = 10 * time.Second })
	reply := func() []*fake.Reply {
		return []*fake.Reply{
			fake.NewReply().ToolCall("c1", "read_file", `{"path":"hello.txt"}`).Done(),
			fake.NewReply().Text("It says hello.").Done(),
		}
	}
	e.llm.Generate = fake.Script(append(reply(), append(reply(), append(reply(), reply()...)...)...)...)
	c := e.store.(store.CommitCounter)
	task := func() int64 {
		before := c.Commits()
		id := e.create(readOnly)
		if st := end(t, e.run(id, "Read hello.txt and tell me what it says")); st.GetStatus() != completedS {
			t.Fatalf("the task ended %v: %s", st.GetStatus(), st.GetMessage())
		}
		return c.Commits() - before
	}
	task() // the first session of a spec also learns the tools
	fewest := task()
	for range 2 {
		fewest = min(fewest, task())
	}
	if fewest > commitsPerTask {
		t.Fatalf("a task committed %d transactions, want at most %d", fewest, commitsPerTask)
	}
}
