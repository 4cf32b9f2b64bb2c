package splice

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// TestConnsHalfCloses proves each direction's end reaches the other side
// as a half-close: a client that sends its request and closes its write
// half still gets the whole answer back.
func TestConnsHalfCloses(t *testing.T) {
	server, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	go func() {
		c, err := server.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		req, _ := io.ReadAll(c) // to the client's half-close
		_, _ = c.Write([]byte("answer to " + string(req)))
	}()
	front, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer front.Close()
	go func() {
		c, err := front.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		up, err := net.Dial("tcp", server.Addr().String())
		if err != nil {
			return
		}
		defer up.Close()
		Conns(c, c, up)
	}()
	client, err := net.Dial("tcp", front.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Write([]byte("question")); err != nil {
		t.Fatal(err)
	}
	if err := client.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(client)
	if err != nil || !strings.HasPrefix(string(got), "answer to question") {
		t.Fatalf("got %q, %v", got, err)
	}
}
