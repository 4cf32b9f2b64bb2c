package environment

import (
	"runtime"
	"strconv"
	"testing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

func notice(id int) *penguinv1.WatchEnvironmentResponse {
	return &penguinv1.WatchEnvironmentResponse{Notice: &penguinv1.WatchEnvironmentResponse_BackgroundDone{
		BackgroundDone: &penguinv1.BackgroundDone{ProcessId: strconv.Itoa(id)},
	}}
}

// drain takes what is queued for w and reports the process ids in order.
func drain(h *notices, w *watcher) ([]string, bool) {
	batch, open := h.take(w)
	var ids []string
	for _, n := range batch {
		ids = append(ids, n.GetBackgroundDone().GetProcessId())
	}
	return ids, open
}

// Every watcher gets every notice, in order; one that stops reading is
// dropped past the bound with what was queued for it, and the others go
// on; the pending ones go to the first watcher; disposal ends the rest
// after what they were given.
func TestNoticesReachEveryWatcher(t *testing.T) {
	h := newNotices()
	h.publish(notice(0))
	a := h.subscribe()
	b := h.subscribe()
	if ids, open := drain(h, a); len(ids) != 1 || ids[0] != "0" || !open {
		t.Fatalf("the first watcher got %v (open %v), want the pending notice", ids, open)
	}
	for i := 1; i <= maxQueuedNotices+5; i++ {
		h.publish(notice(i))
		if i%7 == 0 {
			ids, open := drain(h, a)
			if !open || len(ids) == 0 || ids[len(ids)-1] != strconv.Itoa(i) {
				t.Fatalf("after notice %d the reading watcher got %v (open %v)", i, ids, open)
			}
		}
	}
	select {
	case <-b.wake:
	default:
		t.Fatal("the watcher that stopped reading was not woken")
	}
	ids, open := drain(h, b)
	if open || len(ids) != maxQueuedNotices || ids[0] != "1" || ids[len(ids)-1] != strconv.Itoa(maxQueuedNotices) {
		t.Fatalf("the watcher that stopped reading got %d notices (open %v), want the first %d and its end", len(ids), open, maxQueuedNotices)
	}
	h.publish(notice(1000))
	h.close()
	ids, open = drain(h, a)
	if open || len(ids) == 0 || ids[len(ids)-1] != "1000" {
		t.Fatalf("at disposal the reading watcher got %v (open %v), want the last notice and its end", ids, open)
	}
	if ids, open := drain(h, h.subscribe()); open || len(ids) != 0 {
		t.Fatalf("a watch after disposal got %v (open %v)", ids, open)
	}
}

// A watch that sees no notice (most tasks' watch) costs little: its
// queue is made by the first notice, not with room for the bound.
func TestWatchAllocatesLittle(t *testing.T) {
	h := newNotices()
	const n = 1000
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range n {
		h.unsubscribe(h.subscribe())
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / n; per > 512 {
		t.Fatalf("a watch allocates %d bytes, want at most 512", per)
	}
}
