package llmtest

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// RawServer is an HTTP/1.1 server on a bare listener that answers every
// request with Response and keeps, when asked to, each request's bytes as
// they came off the connection. It reads with one buffer per connection
// and allocates nearly nothing per request, so a client's allocations can
// be counted with it in the same process.
type RawServer struct {
	// Response is written after each request; an empty 200 by default.
	Response string

	ln       net.Listener
	wg       sync.WaitGroup
	record   bool
	mu       sync.Mutex
	requests [][]byte
}

// NewRawServer starts a RawServer that keeps the requests' bytes when
// record is set; it stops when the test ends.
func NewRawServer(t testing.TB, record bool) *RawServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &RawServer{Response: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", ln: ln, record: record}
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

// URL is a chat completions URL on the server.
func (s *RawServer) URL() string { return "http://" + s.ln.Addr().String() + "/v1/chat/completions" }

// Requests returns the requests' bytes so far, without their Host
// header's value (each server has its own port).
func (s *RawServer) Requests() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(s.requests))
	for i, raw := range s.requests {
		before, rest, _ := bytes.Cut(raw, []byte("\r\nHost: "))
		_, after, _ := bytes.Cut(rest, []byte("\r\n"))
		out[i] = append(append(bytes.Clone(before), "\r\nHost: \r\n"...), after...)
	}
	return out
}

func (s *RawServer) serve(c net.Conn) {
	defer func() { _ = c.Close() }()
	var raw bytes.Buffer
	var src io.Reader = c
	if s.record {
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
		if s.record {
			// One request at a time: what was read beyond this one is
			// still in br.
			n := raw.Len() - br.Buffered()
			s.mu.Lock()
			s.requests = append(s.requests, bytes.Clone(raw.Bytes()[:n]))
			s.mu.Unlock()
			raw.Next(n)
		}
		if _, err := io.WriteString(c, s.Response); err != nil {
			return
		}
	}
}
