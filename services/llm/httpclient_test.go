package llm_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"

	"github.com/penguin-agent/penguin/services/llm"
	"github.com/penguin-agent/penguin/services/llm/internal/llmtest"
)

// post sends body to url with hc and reads the answer.
func post(t testing.TB, hc *http.Client, url string, body []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
}

// requestBody is a JSON body of n bytes.
func requestBody(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'a' + byte(i%26)
	}
	b[0], b[1], b[n-2], b[n-1] = '{', '"', '"', '}'
	return b
}

// TestHTTPClientWireUnchanged sends the same requests with NewHTTPClient
// and with Go's default transport: the bytes that reach the server are the
// same, for a body within the transport's write buffer, one a little
// longer, one longer than a copy buffer and one several times that.
func TestHTTPClientWireUnchanged(t *testing.T) {
	for _, n := range []int{300, 6 << 10, 40 << 10, 200<<10 + 7} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			body := requestBody(n)
			capture := func(hc *http.Client) [][]byte {
				srv := llmtest.NewRawServer(t, true)
				defer hc.CloseIdleConnections()
				for range 2 { // a new connection, then the same one again
					post(t, hc, srv.URL(), body)
				}
				return srv.Requests()
			}
			want := capture(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})
			got := capture(llm.NewHTTPClient())
			if len(want) != 2 || len(got) != 2 {
				t.Fatalf("requests seen: %d with the default transport, %d with NewHTTPClient; want 2 each", len(want), len(got))
			}
			for i := range want {
				if !bytes.Equal(want[i], got[i]) {
					t.Errorf("request %d differs:\ndefault transport %q…\nNewHTTPClient     %q…", i, clip(want[i]), clip(got[i]))
				}
				if !bytes.HasSuffix(got[i], body) {
					t.Errorf("request %d does not end with the body", i)
				}
			}
		})
	}
}

func clip(b []byte) []byte { return b[:min(len(b), 200)] }

// TestHTTPClientCopiesBodyWithoutAllocating posts a 64 KiB body again and
// again: the transport's copy of the body to the connection goes through
// a pooled buffer, where io.Copy allocated 32 KiB at every request.
func TestHTTPClientCopiesBodyWithoutAllocating(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled buffers at random and changes allocation counts")
	}
	srv := llmtest.NewRawServer(t, false)
	hc := llm.NewHTTPClient()
	defer hc.CloseIdleConnections()
	body := requestBody(64 << 10)
	post(t, hc, srv.URL(), body) // the connection, and the pool's buffer
	const requests = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range requests {
		post(t, hc, srv.URL(), body)
	}
	runtime.ReadMemStats(&after)
	if per := (after.TotalAlloc - before.TotalAlloc) / requests; per > 16<<10 {
		t.Errorf("%d bytes allocated per request of a 64 KiB body; the body's copy should allocate nothing", per)
	}
}

// BenchmarkHTTPClientPost posts a body the size of a first model request
// (20 KiB, most of it the tools' schemas) to a server in the same process,
// with Go's default transport and with NewHTTPClient.
func BenchmarkHTTPClientPost(b *testing.B) {
	srv := llmtest.NewRawServer(b, false)
	body := requestBody(20 << 10)
	for _, c := range []struct {
		name string
		hc   *http.Client
	}{
		{"default", &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}},
		{"NewHTTPClient", llm.NewHTTPClient()},
	} {
		b.Run(c.name, func(b *testing.B) {
			defer c.hc.CloseIdleConnections()
			post(b, c.hc, srv.URL(), body)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				post(b, c.hc, srv.URL(), body)
			}
		})
	}
}
