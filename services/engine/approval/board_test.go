package approval_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/approval"
)

// boardRig records what a board publishes and how its waiting state moves.
type boardRig struct {
	mu        sync.Mutex
	seq       int64
	published []*penguinv1.RunEvent
	waiting   []bool
	fail      error
	b         *approval.Board
}

func newBoardRig() *boardRig {
	r := &boardRig{}
	r.b = approval.NewBoard(func(ev *penguinv1.RunEvent, opens bool) (int64, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		if opens {
			r.waiting = append(r.waiting, true)
		}
		if r.fail != nil {
			return 0, r.fail
		}
		r.seq++
		ev.Sequence = r.seq
		r.published = append(r.published, ev)
		return r.seq, nil
	}, func() {
		r.mu.Lock()
		r.waiting = append(r.waiting, false)
		r.mu.Unlock()
	})
	return r
}

func (r *boardRig) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.published)
}

func call(id string) *penguinv1.ToolCall {
	return &penguinv1.ToolCall{ToolCallId: id, Name: "exec_command", Arguments: `{"cmd":"make"}`}
}

type answer struct {
	d   penguinv1.Decision
	err error
}

func ask(ctx context.Context, a approval.Asker, c *penguinv1.ToolCall) <-chan answer {
	ch := make(chan answer, 1)
	go func() {
		d, err := a.Ask(ctx, c, penguinv1.Permission_PERMISSION_RW)
		ch <- answer{d, err}
	}()
	return ch
}

func TestBoardAsksAndSettles(t *testing.T) {
	r := newBoardRig()
	ctx := t.Context()
	own := ask(ctx, r.b.Asker(nil), call("c1"))
	child := ask(ctx, r.b.Asker([]string{"session-child"}), call("c1"))
	eventually.True(t, "both questions published", func() bool { return r.count() == 2 })

	// The same tool call id from another origin is another question.
	if r.b.Answer([]string{"session-other"}, "c1", penguinv1.Decision_DECISION_ALLOW) {
		t.Fatal("an answer for an origin with no question was taken")
	}
	if !r.b.Answer([]string{"session-child"}, "c1", penguinv1.Decision_DECISION_ALLOW) {
		t.Fatal("the child's question was not open")
	}
	if got := <-child; got.err != nil || got.d != penguinv1.Decision_DECISION_ALLOW {
		t.Fatalf("child's answer = %+v", got)
	}
	if r.b.Answer([]string{"session-child"}, "c1", penguinv1.Decision_DECISION_DENY) {
		t.Fatal("a settled question took a second answer")
	}
	// The open question is replayed with a stored history that ends before it.
	if evs := r.b.Between(0, 100); len(evs) != 1 || len(evs[0].GetApprovalRequest().GetOrigin()) != 0 {
		t.Fatalf("Between = %v, want the session's own open question", evs)
	}
	if !r.b.Answer(nil, "c1", penguinv1.Decision_DECISION_DENY) {
		t.Fatal("the session's question was not open")
	}
	if got := <-own; got.err != nil || got.d != penguinv1.Decision_DECISION_DENY {
		t.Fatalf("own answer = %+v", got)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.waiting) != 2 || !r.waiting[0] || r.waiting[1] {
		t.Fatalf("waiting went %v, want [true false]: on at the first question, off after the last", r.waiting)
	}
}

func TestBoardRefusesADuplicateAndEndsWithTheContext(t *testing.T) {
	r := newBoardRig()
	ctx, cancel := context.WithCancel(t.Context())
	first := ask(ctx, r.b.Asker(nil), call("c1"))
	eventually.True(t, "the question published", func() bool { return r.count() == 1 })
	if d, err := r.b.Asker(nil).Ask(ctx, call("c1"), penguinv1.Permission_PERMISSION_RW); err == nil || d != penguinv1.Decision_DECISION_DENY {
		t.Fatalf("a second question about one call = %v, %v", d, err)
	}
	cancel()
	if got := <-first; !errors.Is(got.err, context.Canceled) || got.d != penguinv1.Decision_DECISION_DENY {
		t.Fatalf("answer after the context ended = %+v", got)
	}
	if len(r.b.Between(0, 100)) != 0 {
		t.Fatal("an abandoned question stayed on the board")
	}
}

func TestBoardDeniesWhenItCannotPublish(t *testing.T) {
	r := newBoardRig()
	r.fail = errors.New("log failed")
	d, err := r.b.Asker(nil).Ask(t.Context(), call("c1"), penguinv1.Permission_PERMISSION_RW)
	if err == nil || d != penguinv1.Decision_DECISION_DENY {
		t.Fatalf("Ask with a failed log = %v, %v", d, err)
	}
	if len(r.waiting) != 2 || r.waiting[1] {
		t.Fatalf("waiting went %v, want it back off", r.waiting)
	}
}
