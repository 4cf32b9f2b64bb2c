package sse

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// Body is a request body for [Endpoint.Post], written into a pooled
// buffer. A model request's body is built at every turn and is tens to
// hundreds of KiB (the tools' schemas, then the history): a buffer of
// its own per request was the largest allocation of a task.
//
// The buffer goes back to the pool only once nothing can read it: an
// HTTP transport reads a body from its own goroutine, possibly after the
// response arrived, until it closes it, and asks for it again (the
// request's GetBody) to retry on a new connection or to follow a
// redirect. So Post holds the body until the client's Do returns, every
// reader handed out holds it until it is closed, and a closed reader
// reads nothing more: a Close that races a Read waits for that Read's
// copy, which never waits on I/O.
type Body struct {
	buf  *bytes.Buffer
	refs atomic.Int32
}

// Pool bounds: a body longer than maxPooledBody (a long history) is not
// kept for the next request, so the pool does not pin it. A body of at
// most inlineBody bytes is copied into a buffer of its own when sent
// (below).
const (
	maxPooledBody = 256 << 10
	inlineBody    = 3 << 10
)

var bodyBufs = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// errBodyReleased answers a GetBody after the body was given back, and
// errBodyClosed a read of a closed reader.
var (
	errBodyReleased = errors.New("sse: the request body was released")
	errBodyClosed   = errors.New("sse: read of a closed request body")
)

// NewBody returns an empty body to write into. Post releases it; a body
// that is not posted must be released by its writer.
func NewBody() *Body {
	b := &Body{buf: bodyBufs.Get().(*bytes.Buffer)}
	b.buf.Reset()
	b.refs.Store(1)
	return b
}

// Buffer is where the body is written, before it is posted.
func (b *Body) Buffer() *bytes.Buffer { return b.buf }

// Release gives up the writer's hold on b.
func (b *Body) Release() {
	if b.refs.Add(-1) != 0 {
		return
	}
	buf := b.buf
	b.buf = nil // a use after the release fails loudly
	if buf.Cap() <= maxPooledBody {
		bodyBufs.Put(buf)
	}
}

// hold takes another hold on b, unless it was released.
func (b *Body) hold() bool {
	for {
		n := b.refs.Load()
		if n <= 0 {
			return false
		}
		if b.refs.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// attach makes b req's body, for as long as req's transport reads it;
// the caller keeps its own hold. A body that fits in the transport's
// write buffer (4 KiB, with the headers) goes as a copy in a *bytes.Reader:
// net/http flushes the headers on their own before any body it does not
// know to be in memory, one write more for a body it would have sent with
// them; a longer body is written after the first 4 KiB anyway.
func (b *Body) attach(req *http.Request) {
	req.ContentLength = int64(b.buf.Len())
	if b.buf.Len() <= inlineBody {
		data := bytes.Clone(b.buf.Bytes())
		req.Body = io.NopCloser(bytes.NewReader(data))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil }
		return
	}
	req.Body, _ = b.reader()
	req.GetBody = b.reader
}

// reader returns a reader of b that holds it until closed.
func (b *Body) reader() (io.ReadCloser, error) {
	if !b.hold() {
		return nil, errBodyReleased
	}
	return &bodyReader{body: b, rest: b.buf.Bytes()}, nil
}

// bodyReader reads a Body, and lets it go when closed.
type bodyReader struct {
	mu     sync.Mutex
	body   *Body
	rest   []byte
	closed bool
}

func (r *bodyReader) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return 0, errBodyClosed
	}
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func (r *bodyReader) Close() error {
	r.mu.Lock()
	closed := r.closed
	r.closed, r.rest = true, nil
	r.mu.Unlock()
	if !closed {
		r.body.Release()
	}
	return nil
}
