package grpcserver_test

import (
	"bytes"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/penguin-agent/penguin/internal/grpcflow"
	"github.com/penguin-agent/penguin/internal/grpcserver"
)

// TestNoFlowControlPings calls the server with a bare HTTP/2 client and
// checks that it announces the static windows and sends no PING: with
// dynamic windows grpc-go's server sends one (with a window update) for
// the request's data, which costs both ends system calls for nothing.
func TestNoFlowControlPings(t *testing.T) {
	r := start(t, grpcserver.Options{}, nil)
	c, err := net.Dial("tcp", r.conn.Target())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	var hdr bytes.Buffer
	enc := hpack.NewEncoder(&hdr)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/grpc.health.v1.Health/Check"}, {Name: ":authority", Value: "test"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// An empty HealthCheckRequest: not compressed, zero bytes long.
	if err := fr.WriteData(1, true, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}

	var window uint32
	var until time.Time // the end of the wait for a late PING
	pings := 0
	for {
		f, err := fr.ReadFrame()
		if ne, ok := err.(net.Error); ok && ne.Timeout() && !until.IsZero() {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			window, _ = f.Value(http2.SettingInitialWindowSize)
			if err := fr.WriteSettingsAck(); err != nil {
				t.Fatal(err)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				pings++
				if err := fr.WritePing(true, f.Data); err != nil {
					t.Fatal(err)
				}
			}
		case *http2.HeadersFrame:
			if f.StreamID == 1 && f.StreamEnded() && until.IsZero() {
				until = time.Now().Add(200 * time.Millisecond)
				if err := c.SetReadDeadline(until); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if window != grpcflow.StreamWindow {
		t.Errorf("the server announced a stream window of %d bytes, want %d", window, grpcflow.StreamWindow)
	}
	if pings != 0 {
		t.Errorf("the server sent %d PINGs for one call, want none", pings)
	}
}
