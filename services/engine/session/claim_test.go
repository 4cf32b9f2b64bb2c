package session_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/session"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// racedStore is a store on which another replica acts right after a
// task's read without the lease (PeekLease), once armed.
type racedStore struct {
	store.Store
	race atomic.Pointer[func(ctx context.Context, id string, last int64) error]
}

func (s *racedStore) PeekLease(ctx context.Context, id string, agent store.AgentRef) (*store.LeaseRead, error) {
	r, err := s.Store.PeekLease(ctx, id, agent)
	if f := s.race.Swap(nil); f != nil && err == nil {
		if err := (*f)(ctx, id, r.Row.LastSequence); err != nil {
			return nil, err
		}
	}
	return r, err
}

// A Run that read the session without its lease takes the lease with its
// prompt's commit; when another replica took the lease in between, or
// ran a task and let it go, that commit writes nothing and the Run is
// refused as busy, sending nothing. The next Run goes ahead.
func TestARunWhoseLeaseWasTakenSinceItsReadWritesNothing(t *testing.T) {
	var st *racedStore
	r := newRig(t, func(o *session.Options) {
		st = &racedStore{Store: o.Store}
		o.Store = st
	})
	r.llm.Generate = fake.Script(fake.NewReply().Text("done").Done())
	id := r.create(t, session.CreateSpec{Model: model, Workspace: "ws"}).GetSessionId()
	ctx := t.Context()
	races := map[string]func(ctx context.Context, id string, last int64) error{
		"lease held": func(ctx context.Context, id string, _ int64) error {
			_, err := st.Store.AcquireLease(ctx, id, "engine-elsewhere", "10.0.0.2:7423", time.Minute)
			return err
		},
		"task run and ended": func(ctx context.Context, id string, last int64) error {
			return st.Store.AppendEvents(ctx, id, store.Event{Sequence: last + 1, Message: omni.UserText("elsewhere")})
		},
	}
	for _, name := range []string{"lease held", "task run and ended"} {
		before, err := st.Store.ReadEvents(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		race := races[name]
		st.race.Store(&race)
		sent := 0
		err = r.mgr.Run(ctx, id, session.RunSpec{Prompt: "go"}, func(*penguinv1.RunEvent) error { sent++; return nil })
		if !errors.Is(err, session.ErrBusy) {
			t.Fatalf("%s: Run = %v, want ErrBusy", name, err)
		}
		if sent != 0 {
			t.Errorf("%s: the refused Run sent %d events", name, sent)
		}
		after, err := st.Store.ReadEvents(ctx, id, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range after[len(before):] {
			if e.Message.GetText().GetText() == "go" {
				t.Fatalf("%s: the refused Run recorded its prompt", name)
			}
		}
		owner, _, _, err := st.Store.LeaseHolder(ctx, id)
		switch name {
		case "lease held":
			if owner != "engine-elsewhere" {
				t.Fatalf("%s: lease holder %q, %v; want the other replica's lease untouched", name, owner, err)
			}
			if err := st.Store.ReleaseLease(ctx, id, "engine-elsewhere"); err != nil {
				t.Fatal(err)
			}
		default:
			if !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("%s: lease holder %q, %v; want none", name, owner, err)
			}
		}
	}
	if err := r.mgr.Run(ctx, id, session.RunSpec{Prompt: "again"}, func(*penguinv1.RunEvent) error { return nil }); err != nil {
		t.Fatalf("the Run after the refused ones: %v", err)
	}
	if _, _, _, err := st.Store.LeaseHolder(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the lease outlived the task: %v", err)
	}
}
