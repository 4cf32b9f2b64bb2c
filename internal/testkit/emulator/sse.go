package emulator

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"
)

// errEnded stops a stream that a fault cut short; the handler just returns.
var errEnded = errors.New("emulator: stream ended by a scripted fault")

// errServerClosed stops a stream because the server is shutting down.
var errServerClosed = errors.New("emulator: server closed")

// faultFramer renders the provider-specific frames that stream faults send.
type faultFramer interface {
	// appendMalformed appends an SSE frame whose data does not parse.
	appendMalformed(dst []byte, body string) []byte
	// appendStreamError appends the provider's in-stream error frame.
	appendStreamError(dst []byte, f *Fault) []byte
}

// sseWriter writes one response's SSE frames: it paces deltas, flushes every
// frame so that the client sees it at once, and fires the turn's stream
// fault when its event count is reached. It belongs to one request, so it
// needs no lock.
type sseWriter struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	ctx    context.Context
	done   <-chan struct{}
	framer faultFramer

	fault      *Fault // a stream-phase fault, or nil
	faultFired bool

	firstDelay time.Duration
	delay      time.Duration
	deltas     int // paced frames written
	events     int // frames written
	timer      *time.Timer

	// buf is the frame being built; callers append to buf[:0] and call send.
	buf []byte
}

func newSSEWriter(ctx context.Context, w http.ResponseWriter, done <-chan struct{}, framer faultFramer, t *compiledTurn) *sseWriter {
	sw := &sseWriter{
		w:          w,
		rc:         http.NewResponseController(w),
		ctx:        ctx,
		done:       done,
		framer:     framer,
		firstDelay: t.turn.FirstDelay,
		delay:      t.turn.Delay,
		buf:        make([]byte, 0, 512),
	}
	if f := t.turn.Fault; f != nil && f.isStreamFault() {
		sw.fault = f
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return sw
}

// isStreamFault reports whether the fault happens after streaming started.
func (f *Fault) isStreamFault() bool {
	switch f.Kind {
	case FaultDrop, FaultMalformed, FaultStreamError, FaultTruncate, FaultStall:
		return true
	}
	return false
}

// send writes the frame in buf. A paced frame (one that carries a delta)
// first waits FirstDelay or Delay.
func (sw *sseWriter) send(paced bool) error {
	if err := sw.maybeFault(false); err != nil {
		return err
	}
	if paced {
		d := sw.delay
		if sw.deltas == 0 {
			d = sw.firstDelay
		}
		if err := sw.sleep(d); err != nil {
			return err
		}
		sw.deltas++
	}
	if _, err := sw.w.Write(sw.buf); err != nil {
		return err
	}
	if err := sw.rc.Flush(); err != nil {
		return err
	}
	sw.events++
	return nil
}

// finish fires a fault whose event count the stream never reached, so that
// a script's fault always happens.
func (sw *sseWriter) finish() error {
	return sw.maybeFault(true)
}

func (sw *sseWriter) maybeFault(atEnd bool) error {
	f := sw.fault
	if f == nil || sw.faultFired || (!atEnd && sw.events < f.After) {
		return nil
	}
	sw.faultFired = true
	switch f.Kind {
	case FaultStall:
		if f.Duration > 0 {
			return sw.sleep(f.Duration)
		}
		return sw.waitForever()
	case FaultTruncate:
		return errEnded
	case FaultMalformed:
		sw.buf = sw.framer.appendMalformed(sw.buf[:0], f.Body)
	case FaultStreamError:
		sw.buf = sw.buf[:0]
		if f.Comment != "" {
			sw.buf = append(append(append(sw.buf, ": "...), f.Comment...), "\n\n"...)
		}
		sw.buf = sw.framer.appendStreamError(sw.buf, f)
	case FaultDrop:
		_ = sw.rc.Flush()
		sw.drop(f.Reset)
		return errEnded
	}
	if _, err := sw.w.Write(sw.buf); err != nil {
		return err
	}
	_ = sw.rc.Flush()
	return errEnded
}

// drop closes the TCP connection under the response: a stream then ends
// without the chunked-encoding terminator, and a response not yet begun
// ends before its status line.
func (sw *sseWriter) drop(reset bool) {
	conn, bufrw, err := sw.rc.Hijack()
	if err != nil {
		// The connection cannot be taken over (HTTP/2, a recorder): abort
		// the response the way net/http offers for exactly this.
		panic(http.ErrAbortHandler)
	}
	_ = bufrw.Flush()
	if tc, ok := conn.(*net.TCPConn); ok && reset {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// sleep waits d, or less when the client leaves or the server closes.
func (sw *sseWriter) sleep(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	if sw.timer == nil {
		sw.timer = time.NewTimer(d)
	} else {
		sw.timer.Reset(d)
	}
	select {
	case <-sw.timer.C:
		return nil
	case <-sw.ctx.Done():
		sw.timer.Stop()
		return sw.ctx.Err()
	case <-sw.done:
		sw.timer.Stop()
		return errServerClosed
	}
}

func (sw *sseWriter) waitForever() error {
	select {
	case <-sw.ctx.Done():
		return sw.ctx.Err()
	case <-sw.done:
		return errServerClosed
	}
}

// stop releases the writer's timer.
func (sw *sseWriter) stop() {
	if sw.timer != nil {
		sw.timer.Stop()
	}
}
