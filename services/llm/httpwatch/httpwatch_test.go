package httpwatch_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"testing/synctest"
	"time"

	"github.com/penguin-agent/penguin/services/llm/failure"
	"github.com/penguin-agent/penguin/services/llm/httpwatch"
)

// TestWatchdog runs in a synctest bubble: the watchdog's timer and the
// test's pauses are on the bubble's fake clock, so "activity every 20ms
// keeps a 100ms watchdog quiet" holds exactly, however loaded the machine.
func TestWatchdog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, w := httpwatch.NewWatchdog(t.Context(), 100*time.Millisecond)
		defer w.Stop()
		// Activity keeps it alive past several idle periods.
		deadline := time.Now().Add(350 * time.Millisecond)
		for time.Now().Before(deadline) {
			w.Touch()
			if ctx.Err() != nil {
				t.Fatal("watchdog fired despite activity")
			}
			time.Sleep(20 * time.Millisecond)
		}
		quiet := time.Now()
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
			t.Fatal("watchdog did not fire after going quiet")
		}
		if !errors.Is(context.Cause(ctx), failure.ErrIdleTimeout) {
			t.Errorf("cause = %v", context.Cause(ctx))
		}
		// The last touch was 20ms before the loop ended, so the watchdog
		// fires 80ms after it, on the fake clock exactly.
		if waited := time.Since(quiet); waited != 80*time.Millisecond {
			t.Errorf("fired %s after the loop ended, want 80ms", waited)
		}

		off, w2 := httpwatch.NewWatchdog(t.Context(), 0)
		w2.Touch()
		w2.Stop()
		if !errors.Is(context.Cause(off), context.Canceled) {
			t.Errorf("stopped watchdog cause = %v", context.Cause(off))
		}
	})
}

func TestDoerRecordsTheExchange(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "req_42")
		w.Header().Set("X-Seen-Title", r.Header.Get("X-Title"))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, "slow down")
	}))
	defer srv.Close()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	d := &httpwatch.Doer{Client: &http.Client{Transport: tr}, Headers: http.Header{"X-Title": {"penguin"}}}
	reads := 0
	ex := httpwatch.NewExchange(func() { reads++ })
	req, _ := http.NewRequestWithContext(httpwatch.With(t.Context(), ex), http.MethodPost, srv.URL, nil)
	if ex.Sent() {
		t.Fatal("sent before Do")
	}
	resp, err := d.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	status, h := ex.Response()
	if !ex.Sent() || status != 429 || h.Get("X-Request-Id") != "req_42" || h.Get("X-Seen-Title") != "penguin" || string(body) != "slow down" {
		t.Errorf("exchange: sent %v status %d header %v body %q", ex.Sent(), status, h, body)
	}
	if reads < 3 { // sent, headers, body
		t.Errorf("activity reported %d times", reads)
	}
}
