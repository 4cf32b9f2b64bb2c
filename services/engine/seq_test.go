package engine_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/testkit/eventually"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
)

// Sequence numbers go on from where they stopped when the engine stops
// cleanly and starts again: the first event after the restart is numbered
// right after the last one streamed before it (no gap, no reuse), and the
// clean stop leaves the SQLite database in one file.
func TestSequencesContinueAcrossARestart(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("one").Done(),
		fake.NewReply().Text("two").Done(),
	)
	id := e.create(allowAll)
	first := e.run(id, "first")
	last := first[len(first)-1].GetSequence()
	e.stop()
	if info, err := os.Stat(e.storeURL + "-wal"); err == nil && info.Size() > 0 {
		t.Errorf("the clean stop left a WAL of %d bytes", info.Size())
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	e.start()
	second := e.run(id, "second")
	if got := second[0].GetSequence(); got != last+1 {
		t.Fatalf("the first event after the restart is %d, the last before it was %d", got, last)
	}
	checkStream(t, append(first, second...))
	if st := end(t, second); st.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
		t.Fatalf("second run: %v", st)
	}
}

// The mark is saved when the task ends: a runtime that a watcher still
// holds when the store closes (so its unload cannot save anything) does
// not make the next load leave a gap.
func TestSequencesContinueWhenTheUnloadCannotSave(t *testing.T) {
	e := newEnv(t)
	e.llm.Generate = fake.Script(
		fake.NewReply().Text("one").Done(),
		fake.NewReply().Text("two").Done(),
	)
	id := e.create(allowAll)
	first := e.run(id, "first")
	last := first[len(first)-1].GetSequence()
	ctx, cancel := context.WithCancel(e.ctx())
	stream, err := e.client.Attach(ctx, &penguinv1.AttachRequest{SessionId: id, AfterSequence: last})
	if err != nil {
		t.Fatal(err)
	}
	eventually.True(t, "Attach holds the runtime", func() bool { return e.mgr.Loaded() == 1 })
	_ = e.store.Close()
	cancel()
	_, _ = stream.Recv()
	eventually.True(t, "the runtime is unloaded", func() bool { return e.mgr.Loaded() == 0 })
	e.start()
	second := e.run(id, "second")
	if got := second[0].GetSequence(); got != last+1 {
		t.Fatalf("the first event after the restart is %d, the last before it was %d", got, last)
	}
}
