package sse

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/penguin-agent/penguin/services/llm/httpwatch"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
)

// jsonBody is a JSON body of n bytes whose bytes depend on seed.
func jsonBody(n, seed int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte((i+seed)%26)
	}
	b[0], b[1], b[n-2], b[n-1] = '{', '"', '"', '}'
	return b
}

// TestPostedBodyOnTheWire posts bodies from a pooled Body and, the way
// Post sent them before, from a *bytes.Reader over their bytes, with the
// same headers: the bytes that reach the server are the same, for bodies
// sent as a copy (at most inlineBody bytes) and from the pool.
func TestPostedBodyOnTheWire(t *testing.T) {
	for _, n := range []int{100, inlineBody, inlineBody + 1, 40 << 10, maxPooledBody + 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			data := jsonBody(n, n)
			srv := llmtest.NewRawServer(t, true)
			srv.Response = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: 0\r\n\r\n"
			hc := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
			defer hc.CloseIdleConnections()
			e := &Endpoint{Doer: &httpwatch.Doer{Client: hc}, Header: http.Header{"Authorization": {"Bearer k"}}}

			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL(), bytes.NewReader(data))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer k")
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "text/event-stream")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			_ = resp.Body.Close()

			body := NewBody()
			body.Buffer().Write(data)
			s, fe := e.Post(context.Background(), srv.URL(), body)
			if fe != nil {
				t.Fatal(fe)
			}
			s.Close()

			got := srv.Requests()
			if len(got) != 2 {
				t.Fatalf("%d requests arrived, want 2", len(got))
			}
			if !bytes.Equal(got[0], got[1]) {
				t.Errorf("the pooled body's request differs:\nbytes.Reader %q…\npooled Body  %q…", got[0][:300], got[1][:300])
			}
		})
	}
}

// TestBodyHeldWhileRead checks a body's buffer outlives Post's hold while
// a reader is open, goes back once every reader is closed, and that a
// closed reader, or a GetBody after the release, reads nothing.
func TestBodyHeldWhileRead(t *testing.T) {
	b := NewBody()
	b.Buffer().Write(jsonBody(inlineBody+100, 0))
	req, err := http.NewRequest(http.MethodPost, "http://x/", nil)
	if err != nil {
		t.Fatal(err)
	}
	b.attach(req)
	again, err := req.GetBody()
	if err != nil {
		t.Fatal(err)
	}
	b.Release() // Post's hold, once Do returned
	if b.buf == nil {
		t.Fatal("the buffer went back to the pool with two readers open")
	}
	if _, err := io.ReadAll(req.Body); err != nil {
		t.Fatal(err)
	}
	_ = req.Body.Close()
	_ = req.Body.Close() // a second Close gives nothing back twice
	if b.buf == nil {
		t.Fatal("the buffer went back to the pool with a reader open")
	}
	p := make([]byte, 10)
	if n, err := again.Read(p); n != 10 || err != nil {
		t.Fatalf("the open reader read %d, %v", n, err)
	}
	_ = again.Close()
	if b.buf != nil {
		t.Fatal("the buffer was not given back once every reader was closed")
	}
	if n, err := again.Read(p); n != 0 || !errors.Is(err, errBodyClosed) {
		t.Fatalf("a closed reader read %d, %v", n, err)
	}
	if _, err := req.GetBody(); !errors.Is(err, errBodyReleased) {
		t.Fatalf("GetBody after the release: %v", err)
	}
}

// TestBodyCloseDuringRead closes readers while other goroutines read
// them, for the race detector: a Close never lets the buffer go under a
// Read.
func TestBodyCloseDuringRead(t *testing.T) {
	for range 200 {
		b := NewBody()
		b.Buffer().Write(jsonBody(64<<10, 0))
		r, err := b.reader()
		if err != nil {
			t.Fatal(err)
		}
		b.Release()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := make([]byte, 512)
			for {
				if _, err := r.Read(p); err != nil {
					return
				}
			}
		}()
		_ = r.Close()
		// The next body may reuse the buffer at once.
		next := NewBody()
		next.Buffer().Write(jsonBody(64<<10, 1))
		wg.Wait()
		next.Release()
	}
}

// TestPooledBodiesOverHTTP2 posts many different bodies at once over
// HTTP/2 with TLS, where the transport reads and closes a body from its
// own goroutines: each arrives whole and unmixed with another's bytes.
func TestPooledBodiesOverHTTP2(t *testing.T) {
	var mu sync.Mutex
	got := map[[32]byte]bool{}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		got[sha256.Sum256(data)] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
	}))
	hs.EnableHTTP2 = true
	hs.StartTLS()
	defer hs.Close()
	e := &Endpoint{Doer: &httpwatch.Doer{Client: hs.Client()}}
	const posts = 64
	want := make([][32]byte, posts)
	var wg sync.WaitGroup
	for i := range posts {
		data := jsonBody(8<<10+i*997, i)
		want[i] = sha256.Sum256(data)
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := NewBody()
			body.Buffer().Write(data)
			s, fe := e.Post(context.Background(), hs.URL+"/v1/chat/completions", body)
			if fe != nil {
				t.Error(fe)
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	for i, w := range want {
		if !got[w] {
			t.Errorf("body %d did not arrive as sent", i)
		}
	}
}
