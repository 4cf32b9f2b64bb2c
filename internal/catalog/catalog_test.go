package catalog_test

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/penguin-agent/penguin/internal/catalog"
	"github.com/penguin-agent/penguin/internal/catalog/internal/generate"
)

// TestGeneratedCatalogIsCurrent fails when catalog.json is not what the
// generator writes from the snapshot: run `go generate
// ./internal/catalog` and commit the result.
func TestGeneratedCatalogIsCurrent(t *testing.T) {
	snap, err := os.ReadFile("modelsdev/catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := generate.Generate(snap)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("catalog.json is stale: run `go generate ./internal/catalog` and commit it")
	}
	wantGo, err := generate.GoSource(got)
	if err != nil {
		t.Fatal(err)
	}
	gotGo, err := os.ReadFile("builtin_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(gotGo, wantGo) {
		t.Fatal("builtin_gen.go is stale: run `go generate ./internal/catalog` and commit it")
	}
}

// TestBuiltinIsCatalogJSON checks that the compiled-in catalog is exactly
// what Parse makes of catalog.json, every field of every model.
func TestBuiltinIsCatalogJSON(t *testing.T) {
	data, err := os.ReadFile("catalog.json")
	if err != nil {
		t.Fatal(err)
	}
	want, err := catalog.Parse(data)
	if err != nil {
		t.Fatal(err)
	}
	got := catalog.Builtin()
	if !reflect.DeepEqual(got, want) {
		for i, p := range want.Providers {
			if i >= len(got.Providers) || !reflect.DeepEqual(got.Providers[i], p) {
				t.Errorf("provider %s differs", p.ID)
			}
		}
		t.Fatal("the built-in catalog is not catalog.json")
	}
}

func TestBuiltin(t *testing.T) {
	c := catalog.Builtin()
	providers, models := c.Size()
	t.Logf("built-in catalog: %d providers, %d models", providers, models)
	if providers < 12 || models < 600 {
		t.Fatalf("catalog has %d providers and %d models", providers, models)
	}
	gpt4o := c.Provider("openai").Model("gpt-4o")
	if gpt4o == nil || gpt4o.Output != 16384 || gpt4o.Reasoning || len(gpt4o.Thinking) != 0 || !gpt4o.Images {
		t.Fatalf("gpt-4o = %+v", gpt4o)
	}
	gpt5 := c.Provider("openai").Model("gpt-5")
	if gpt5 == nil || gpt5.Thinking["none"] != "minimal" || gpt5.Thinking["max"] != "high" || gpt5.Temperature {
		t.Fatalf("gpt-5 = %+v", gpt5)
	}
	opus := c.Provider("anthropic").Model("claude-opus-4-1")
	if opus == nil || opus.Thinking["max"] != "31999" || opus.Thinking["none"] != catalog.WireOff {
		t.Fatalf("claude-opus-4-1 thinking = %v", opus.Thinking)
	}
	if c.Provider("nope") != nil || c.Provider("openai").Model("nope") != nil {
		t.Fatal("lookups of unknown ids found something")
	}
	// Every thinking value of every model is one its provider accepts.
	for _, p := range c.Providers {
		for _, m := range p.Models {
			for level, wire := range m.Thinking {
				if m.Controls == nil {
					t.Errorf("%s/%s: thinking %s=%s without controls", p.ID, m.ID, level, wire)
				}
			}
		}
	}
}

func TestCost(t *testing.T) {
	read, write := 0.3, 3.75
	c := &catalog.Cost{Input: 3, Output: 15, CacheRead: &read, CacheWrite: &write}
	// 1000 uncached input, 2000 cache reads, 400 cache writes, 500 output.
	got := c.Of(catalog.Usage{Input: 3400, CacheRead: 2000, CacheWrite: 400, Output: 500})
	want := (1000*3 + 2000*0.3 + 400*3.75 + 500*15) / 1e6
	if got != want {
		t.Fatalf("cost = %v, want %v", got, want)
	}
	// Without cache prices, cached input costs the input price.
	plain := &catalog.Cost{Input: 1, Output: 2}
	if got := plain.Of(catalog.Usage{Input: 1000, CacheRead: 500, Output: 1000}); got != 0.003 {
		t.Fatalf("cost without cache prices = %v", got)
	}
}

func TestMerge(t *testing.T) {
	base := catalog.Builtin()
	over := []byte(`{"providers":[
	  {"id":"openai","models":[{"id":"gpt-4o","output":8000,"cost":{"input":1,"output":2}},{"id":"my-model","context":32768,"output":4096,"tools":true}]},
	  {"id":"local","name":"Local","api":"openai-chat","base_url":"http://127.0.0.1:8000/v1","models":[{"id":"qwen3","context":40960,"reasoning":true,"controls":{"toggle":true},"thinking":{"none":"off","high":"on"}}]}
	]}`)
	m, err := catalog.Merge(base, over)
	if err != nil {
		t.Fatal(err)
	}
	gpt4o := m.Provider("openai").Model("gpt-4o")
	if gpt4o.Output != 8000 || gpt4o.Context != 128000 || gpt4o.Cost.Input != 1 || gpt4o.Cost.CacheRead == nil || *gpt4o.Cost.CacheRead != 1.25 {
		t.Fatalf("merged gpt-4o = %+v cost %+v", gpt4o, gpt4o.Cost)
	}
	if mm := m.Provider("openai").Model("my-model"); mm == nil || mm.Output != 4096 {
		t.Fatalf("added model = %+v", mm)
	}
	if l := m.Provider("local").Model("qwen3"); l == nil || l.Thinking["high"] != "on" {
		t.Fatalf("added provider's model = %+v", l)
	}
	if base.Provider("openai").Model("gpt-4o").Output != 16384 || base.Provider("local") != nil {
		t.Fatal("Merge changed the base catalog")
	}
	if _, err := catalog.Merge(base, []byte(`{"providers":[{"id":"x","modles":[]}]}`)); err == nil {
		t.Fatal("an override with an unknown key was accepted")
	}
	if _, err := catalog.Merge(base, []byte(`{"providers":[{"id":"x","models":[{"id":"m","output":-1}]}]}`)); err == nil {
		t.Fatal("an override with a negative limit was accepted")
	}
}
