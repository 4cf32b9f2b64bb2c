package llm_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/penguin-agent/penguin/services/llm"
)

// rawServer is an HTTP/1.1 server on a bare listener that answers every
// request with an empty 200 and hands the request's bytes, as they came
// off the connection, to record (when not nil). It reads with one buffer
// per connection and allocates nearly nothing per request, so the
// client's allocations can be counted with it in the same process.
type rawServer struct {
	ln     net.Listener
	record func([]byte)
	wg     sync.WaitGroup
}

func newRawServer(t testing.TB, record func([]byte)) *rawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &rawServer{ln: ln, record: record}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

func (s *rawServer) url() string { return "http://" + s.ln.Addr().String() + "/v1/chat/completions" }

func (s *rawServer) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	var raw bytes.Buffer
	var src io.Reader = c
	if s.record != nil {
		src = io.TeeReader(c, &raw)
	}
	br := bufio.NewReaderSize(src, 64<<10)
	for {
		length := 0
		for {
			line, err := br.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(line) <= 2 {
				break
			}
			if name, value, ok := bytes.Cut(line, []byte(":")); ok && strings.EqualFold(string(name), "Content-Length") {
				length, _ = strconv.Atoi(string(bytes.TrimSpace(value)))
			}
		}
		if _, err := br.Discard(length); err != nil {
			return
		}
		if s.record != nil {
			// The connection serves one request at a time: what was read
			// beyond this one is still in br.
			s.record(bytes.Clone(raw.Bytes()[:raw.Len()-br.Buffered()]))
			raw.Next(raw.Len() - br.Buffered())
		}
		if _, err := io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"); err != nil {
			return
		}
	}
}

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
				var mu sync.Mutex
				var got [][]byte
				srv := newRawServer(t, func(b []byte) {
					mu.Lock()
					defer mu.Unlock()
					got = append(got, b)
				})
				defer hc.CloseIdleConnections()
				for range 2 { // a new connection, then the same one again
					post(t, hc, srv.url(), body)
				}
				mu.Lock()
				defer mu.Unlock()
				return got
			}
			want := capture(&http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()})
			got := capture(llm.NewHTTPClient())
			if len(want) != 2 || len(got) != 2 {
				t.Fatalf("requests seen: %d with the default transport, %d with NewHTTPClient; want 2 each", len(want), len(got))
			}
			for i := range want {
				w, g := withoutHost(want[i]), withoutHost(got[i])
				if !bytes.Equal(w, g) {
					t.Errorf("request %d differs:\ndefault transport %q…\nNewHTTPClient     %q…", i, clip(want[i]), clip(got[i]))
				}
				if !bytes.HasSuffix(got[i], body) {
					t.Errorf("request %d does not end with the body", i)
				}
			}
		})
	}
}

// withoutHost is a raw request without its Host header's value: each
// server of the test has its own port.
func withoutHost(raw []byte) []byte {
	before, rest, _ := bytes.Cut(raw, []byte("\r\nHost: "))
	_, after, _ := bytes.Cut(rest, []byte("\r\n"))
	return slices.Concat(before, []byte("\r\nHost: \r\n"), after)
}

func clip(b []byte) []byte { return b[:min(len(b), 200)] }

// TestHTTPClientCopiesBodyWithoutAllocating posts a 64 KiB body again and
// again: the transport's copy of the body to the connection goes through
// a pooled buffer, where io.Copy allocated 32 KiB at every request.
func TestHTTPClientCopiesBodyWithoutAllocating(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector drops pooled buffers at random and changes allocation counts")
	}
	srv := newRawServer(t, nil)
	hc := llm.NewHTTPClient()
	defer hc.CloseIdleConnections()
	body := requestBody(64 << 10)
	post(t, hc, srv.url(), body) // the connection, and the pool's buffer
	const requests = 50
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for range requests {
		post(t, hc, srv.url(), body)
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
	srv := newRawServer(b, nil)
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
			post(b, c.hc, srv.url(), body)
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				post(b, c.hc, srv.url(), body)
			}
		})
	}
}
