package llm_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
	"github.com/penguin-agent/penguin/services/llm"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/routing"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
)

// TestHTTPClientReusesConnections proves the default provider client keeps
// a connection per concurrent stream: two waves of concurrent streams to
// one HTTP/1.1 provider open connections for the first wave only. Go's
// default pool (two idle connections per host) would open new ones for
// most of the second wave.
func TestHTTPClientReusesConnections(t *testing.T) {
	const streams = 8
	emu := emulator.New(emulator.Script{
		Turns:       []emulator.Turn{{Text: "hello there", FirstDelay: 50 * time.Millisecond}},
		OnExhausted: emulator.ExhaustedRepeatLast,
	}, emulator.WithoutRecording())
	var opened atomic.Int64
	hs := httptest.NewUnstartedServer(emu.Handler())
	hs.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	hs.Start()
	defer hs.Close()

	hc := llm.NewHTTPClient()
	defer hc.CloseIdleConnections()
	f, err := routing.Parse([]byte("providers:\n  - name: local\n    type: openai\n    base_url: " + hs.URL + "/v1\n"))
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New()
	if err := routing.Build(f, reg, routing.Deps{Lookup: config.MapLookup(nil), HTTPClient: hc}); err != nil {
		t.Fatal(err)
	}
	svc, err := llm.New(llm.Options{Registry: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wave := func() {
		var wg sync.WaitGroup
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var outcome *penguinv1.LLMOutcome
				err := svc.Generate(ctx, &penguinv1.StreamGenerateRequest{
					Model:       &penguinv1.ModelRef{Provider: "local", ModelId: "m"},
					NewMessages: []*penguinv1.OmniMessage{omni.UserText("hi")},
				}, func(r *penguinv1.StreamGenerateResponse) error {
					if o := r.GetOutcome(); o != nil {
						outcome = o
					}
					return nil
				})
				if err != nil || outcome.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
					t.Errorf("stream: %v, outcome %v", err, outcome)
				}
			}()
		}
		wg.Wait()
	}
	wave()
	first := opened.Load()
	if first < 3 {
		t.Fatalf("the first wave of %d overlapping streams opened %d connections; the test needs them to overlap", streams, first)
	}
	wave()
	if extra := opened.Load() - first; extra != 0 {
		t.Errorf("the second wave opened %d new connections after the first opened %d; idle ones should have been reused", extra, first)
	}
}
