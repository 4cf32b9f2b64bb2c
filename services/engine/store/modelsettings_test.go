package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/penguin-agent/penguin/services/engine/store"
)

// TestModelSettings: a project's model settings are put, replaced, listed
// per project and deleted, the price's absent cache prices kept absent,
// on both backends.
func TestModelSettings(t *testing.T) {
	onBothBackends(t, modelSettings)
}

func modelSettings(t *testing.T, st store.Store) {
	ctx := context.Background()
	half := 0.5
	put := func(s *store.ModelSetting) {
		t.Helper()
		if err := st.PutModelSetting(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	put(&store.ModelSetting{Project: "default", Provider: "ollama", ModelID: "qwen", ContextWindow: 32768})
	put(&store.ModelSetting{Project: "default", Provider: "ollama", ModelID: "llama", Price: &store.Price{Input: 1, Output: 2, CacheRead: &half}})
	put(&store.ModelSetting{Project: "other", Provider: "ollama", ModelID: "qwen", ContextWindow: 8192})
	put(&store.ModelSetting{Project: "default", Provider: "ollama", ModelID: "qwen", ContextWindow: 65536})
	list, err := st.ListModelSettings(ctx, "default")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	if l := list[0]; l.ModelID != "llama" || l.ContextWindow != 0 || l.Price == nil || l.Price.Output != 2 || l.Price.CacheRead == nil || *l.Price.CacheRead != 0.5 || l.Price.CacheWrite != nil {
		t.Fatalf("llama: %+v %+v", l, l.Price)
	}
	if q := list[1]; q.ModelID != "qwen" || q.ContextWindow != 65536 || q.Price != nil {
		t.Fatalf("qwen after its replacement: %+v", q)
	}
	if got, err := st.GetModelSetting(ctx, "other", "ollama", "qwen"); err != nil || got.ContextWindow != 8192 {
		t.Fatalf("the other project's: %+v %v", got, err)
	}
	if err := st.DeleteModelSetting(ctx, "default", "ollama", "qwen"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.GetModelSetting(ctx, "default", "ollama", "qwen"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after the delete: %v", err)
	}
	if err := st.DeleteModelSetting(ctx, "default", "ollama", "qwen"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("a second delete: %v", err)
	}
}
