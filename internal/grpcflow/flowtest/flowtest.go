// Package flowtest plays the bare HTTP/2 end of a gRPC connection for the
// tests that check penguin's static flow-control windows from the wire:
// the server's test plays the client, the client's test the server, and
// both read the other end's frames the same way.
package flowtest

import (
	"bytes"
	"errors"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// latePing is how long Watch goes on reading after the call's last frame:
// a PING that flow control sends follows the data it was sent for.
const latePing = 200 * time.Millisecond

// Watch reads the other end's frames from fr, over c, until last reports
// the call's last frame and latePing more has passed. It acknowledges the
// other end's SETTINGS and answers its PINGs, and returns the initial
// stream window it announced and how many PINGs it sent.
func Watch(t testing.TB, c net.Conn, fr *http2.Framer, last func(http2.Frame) bool) (window uint32, pings int) {
	t.Helper()
	var until time.Time
	for {
		f, err := fr.ReadFrame()
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() && !until.IsZero() {
			return window, pings
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
		}
		if until.IsZero() && last(f) {
			until = time.Now().Add(latePing)
			if err := c.SetReadDeadline(until); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// HeaderBlock is fields encoded as one HPACK header block.
func HeaderBlock(t testing.TB, fields ...hpack.HeaderField) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := hpack.NewEncoder(&b)
	for _, f := range fields {
		if err := enc.WriteField(f); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}
