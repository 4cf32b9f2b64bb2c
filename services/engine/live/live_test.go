package live_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/services/engine/live"
)

func ev(seq int64, text string) *penguinv1.RunEvent {
	return &penguinv1.RunEvent{Sequence: seq, Event: &penguinv1.RunEvent_Message{Message: omni.AssistantText(text)}}
}

func seqs(evs []*penguinv1.RunEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.GetSequence()
	}
	return out
}

func TestReadAfterCursor(t *testing.T) {
	b := live.New(10, 4, 0)
	for s := int64(11); s <= 13; s++ {
		b.Publish(ev(s, "x"))
	}
	got, _, err := b.Read(11, 0)
	if err != nil || len(got) != 2 || got[0].GetSequence() != 12 {
		t.Fatalf("Read(11) = %v, %v", seqs(got), err)
	}
	got, _, _ = b.Read(10, 1)
	if len(got) != 1 || got[0].GetSequence() != 11 {
		t.Fatalf("Read(10, limit 1) = %v", seqs(got))
	}
	if got, wake, err := b.Read(13, 0); len(got) != 0 || err != nil || wake == nil {
		t.Fatalf("Read at the head = %v, %v", seqs(got), err)
	}
}

func TestEvictionByCountAndBytes(t *testing.T) {
	b := live.New(0, 4, 0)
	for s := int64(1); s <= 10; s++ {
		b.Publish(ev(s, "x"))
	}
	if b.Oldest() != 7 || b.Last() != 10 {
		t.Fatalf("oldest %d last %d, want 7 and 10", b.Oldest(), b.Last())
	}
	if _, _, err := b.Read(5, 0); !errors.Is(err, live.ErrEvicted) {
		t.Fatalf("Read behind the buffer: %v", err)
	}
	if got, _, err := b.Read(6, 0); err != nil || len(got) != 4 {
		t.Fatalf("Read(6) = %v, %v", seqs(got), err)
	}

	big := live.New(0, 100, 1000)
	for s := int64(1); s <= 5; s++ {
		big.Publish(ev(s, strings.Repeat("y", 400)))
	}
	if big.Oldest() != 4 {
		t.Fatalf("byte bound kept from %d, want 4", big.Oldest())
	}
	// The newest event is kept even when it alone exceeds the bound.
	big.Publish(ev(6, strings.Repeat("z", 5000)))
	if got, _, err := big.Read(5, 0); err != nil || len(got) != 1 {
		t.Fatalf("oversized newest event: %v, %v", seqs(got), err)
	}
}

func TestWrappedRingKeepsOrder(t *testing.T) {
	b := live.New(0, 8, 0)
	for s := int64(1); s <= 30; s++ {
		b.Publish(ev(s, "x"))
		got, _, err := b.Read(max(s-3, b.Oldest()-1), 0)
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i < len(got); i++ {
			if got[i].GetSequence() != got[i-1].GetSequence()+1 {
				t.Fatalf("out of order at %d: %v", s, seqs(got))
			}
		}
	}
}

func TestWakeAndClose(t *testing.T) {
	b := live.New(0, 0, 0)
	_, wake, _ := b.Read(0, 0)
	go b.Publish(ev(1, "x"))
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("publish did not wake the reader")
	}
	_, wake, _ = b.Read(1, 0)
	b.Wake()
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("Wake did not wake the reader")
	}
	if evs, _, _ := b.Read(1, 0); len(evs) != 0 {
		t.Fatalf("Wake published %d events", len(evs))
	}
	_, wake, _ = b.Read(1, 0)
	b.Close()
	b.Wake() // after Close: no effect, and no panic
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("close did not wake the reader")
	}
	if _, _, err := b.Read(0, 0); !errors.Is(err, live.ErrClosed) {
		t.Fatalf("Read after Close: %v", err)
	}
}

// Numbers that were handed out but never published (events that could
// not be recorded) leave gaps that readers step over; only an evicted
// event sends a reader back to the store.
func TestGapsInTheNumbering(t *testing.T) {
	b := live.New(0, 3, 0)
	for _, s := range []int64{1, 2, 7, 8} {
		b.Publish(ev(s, "x"))
	}
	if got, _, err := b.Read(2, 0); err != nil || !slices.Equal(seqs(got), []int64{7, 8}) {
		t.Fatalf("Read(2) across the gap = %v, %v", seqs(got), err)
	}
	if got, _, err := b.Read(5, 0); err != nil || !slices.Equal(seqs(got), []int64{7, 8}) {
		t.Fatalf("Read(5) inside the gap = %v, %v", seqs(got), err)
	}
	if _, _, err := b.Read(0, 0); !errors.Is(err, live.ErrEvicted) {
		t.Fatalf("Read(0) after event 1 was evicted = %v, want ErrEvicted", err)
	}
	if got, _, err := b.Read(1, 0); err != nil || !slices.Equal(seqs(got), []int64{2, 7, 8}) {
		t.Fatalf("Read(1) = %v, %v", seqs(got), err)
	}
}
