package grpcclient_test

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"

	"github.com/penguin-agent/penguin/internal/grpcclient"
	"github.com/penguin-agent/penguin/internal/grpcflow"
	"github.com/penguin-agent/penguin/internal/grpcflow/flowtest"
)

// TestNoFlowControlPings answers a call of a connection with a bare
// HTTP/2 server and checks that the client announces the static windows
// and sends no PING: with dynamic windows grpc-go's client sends one for
// every burst of data it receives (each event of a stream), which the
// server must read and answer.
func TestNoFlowControlPings(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	conn, err := grpcclient.New(lis.Addr().String(), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	called := make(chan error, 1)
	go func() {
		_, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
		called <- err
	}()

	c, err := lis.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, make([]byte, len(http2.ClientPreface))); err != nil {
		t.Fatal(err)
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		t.Fatal(err)
	}
	window, pings := flowtest.Watch(t, c, fr, func(f http2.Frame) bool {
		d, ok := f.(*http2.DataFrame)
		if !ok || !d.StreamEnded() {
			return false
		}
		answer(t, fr, d.StreamID)
		if err := <-called; err != nil {
			t.Fatal(err)
		}
		// The client's PING would follow the answer's data.
		return true
	})
	if window != grpcflow.StreamWindow {
		t.Errorf("the client announced a stream window of %d bytes, want %d", window, grpcflow.StreamWindow)
	}
	if pings != 0 {
		t.Errorf("the client sent %d PINGs for one call, want none", pings)
	}
}

// answer writes a SERVING health answer on stream id: headers, the
// message, trailers.
func answer(t *testing.T, fr *http2.Framer, id uint32) {
	t.Helper()
	headers := func(end bool, fields ...hpack.HeaderField) {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: flowtest.HeaderBlock(t, fields...), EndHeaders: true, EndStream: end}); err != nil {
			t.Fatal(err)
		}
	}
	headers(false, hpack.HeaderField{Name: ":status", Value: "200"}, hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
	msg, err := proto.Marshal(&healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING})
	if err != nil {
		t.Fatal(err)
	}
	if err := fr.WriteData(id, false, append([]byte{0, 0, 0, 0, byte(len(msg))}, msg...)); err != nil {
		t.Fatal(err)
	}
	headers(true, hpack.HeaderField{Name: "grpc-status", Value: "0"})
}
