package grpcserver_test

import (
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/penguin-agent/penguin/internal/grpcflow"
	"github.com/penguin-agent/penguin/internal/grpcflow/flowtest"
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
	hdr := flowtest.HeaderBlock(t, []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/grpc.health.v1.Health/Check"}, {Name: ":authority", Value: "test"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	}...)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hdr, EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	// An empty HealthCheckRequest: not compressed, zero bytes long.
	if err := fr.WriteData(1, true, make([]byte, 5)); err != nil {
		t.Fatal(err)
	}

	window, pings := flowtest.Watch(t, c, fr, func(f http2.Frame) bool {
		h, ok := f.(*http2.HeadersFrame)
		return ok && h.StreamID == 1 && h.StreamEnded()
	})
	if window != grpcflow.StreamWindow {
		t.Errorf("the server announced a stream window of %d bytes, want %d", window, grpcflow.StreamWindow)
	}
	if pings != 0 {
		t.Errorf("the server sent %d PINGs for one call, want none", pings)
	}
}
