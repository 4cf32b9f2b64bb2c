package scaleout

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
)

// otlpReceiver is an OTLP/gRPC trace collector inside the test: the
// services export their spans to it exactly as they would to an
// OpenTelemetry collector.
type otlpReceiver struct {
	collectortrace.UnimplementedTraceServiceServer
	addr string

	mu      sync.Mutex
	spans   []span
	changed chan struct{}
}

// span is one received span, flattened.
type span struct {
	service string // the service.name resource attribute
	trace   string
	id      string
	parent  string // empty for a root span
	name    string
	kind    tracepb.Span_SpanKind
	attrs   map[string]string
	start   time.Time
}

func (s span) String() string {
	return fmt.Sprintf("%s %q (%s) trace=%s id=%s parent=%s", s.service, s.name, s.kind, short(s.trace), short(s.id), short(s.parent))
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// startReceiver serves OTLP on a loopback port until the test ends.
func startReceiver(t testing.TB) *otlpReceiver {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &otlpReceiver{addr: ln.Addr().String(), changed: make(chan struct{})}
	srv := grpc.NewServer()
	collectortrace.RegisterTraceServiceServer(srv, r)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	return r
}

// endpoint is the value of OTEL_EXPORTER_OTLP_ENDPOINT for the receiver.
func (r *otlpReceiver) endpoint() string { return "http://" + r.addr }

// Export implements the OTLP trace service.
func (r *otlpReceiver) Export(_ context.Context, req *collectortrace.ExportTraceServiceRequest) (*collectortrace.ExportTraceServiceResponse, error) {
	var got []span
	for _, rs := range req.GetResourceSpans() {
		service := ""
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, s := range ss.GetSpans() {
				attrs := map[string]string{}
				for _, kv := range s.GetAttributes() {
					v := kv.GetValue()
					switch {
					case v.GetStringValue() != "":
						attrs[kv.GetKey()] = v.GetStringValue()
					default:
						attrs[kv.GetKey()] = strings.TrimSpace(fmt.Sprint(v.GetIntValue()))
					}
				}
				got = append(got, span{
					service: service,
					trace:   hex.EncodeToString(s.GetTraceId()),
					id:      hex.EncodeToString(s.GetSpanId()),
					parent:  hex.EncodeToString(s.GetParentSpanId()),
					name:    s.GetName(),
					kind:    s.GetKind(),
					attrs:   attrs,
					start:   time.Unix(0, int64(s.GetStartTimeUnixNano())),
				})
			}
		}
	}
	r.mu.Lock()
	r.spans = append(r.spans, got...)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
	return &collectortrace.ExportTraceServiceResponse{}, nil
}

// waitFor polls the received spans until done accepts them, and returns
// them; it fails the test after d with what did arrive.
func (r *otlpReceiver) waitFor(t testing.TB, d time.Duration, what string, done func([]span) bool) []span {
	t.Helper()
	deadline := time.NewTimer(d)
	defer deadline.Stop()
	for {
		r.mu.Lock()
		spans := append([]span(nil), r.spans...)
		changed := r.changed
		r.mu.Unlock()
		if done(spans) {
			return spans
		}
		select {
		case <-changed:
		case <-deadline.C:
			t.Fatalf("%s: not within %s; received %d spans:\n%s", what, d, len(spans), describe(spans))
		}
	}
}

// describe lists spans grouped by trace, as indented trees, for failure
// messages.
func describe(spans []span) string {
	byTrace := map[string][]span{}
	var traces []string
	for _, s := range spans {
		if _, ok := byTrace[s.trace]; !ok {
			traces = append(traces, s.trace)
		}
		byTrace[s.trace] = append(byTrace[s.trace], s)
	}
	var b strings.Builder
	for _, tr := range traces {
		fmt.Fprintf(&b, "trace %s\n", short(tr))
		ss := byTrace[tr]
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		ids := map[string]bool{}
		for _, s := range ss {
			ids[s.id] = true
		}
		var walk func(parent string, depth int)
		walk = func(parent string, depth int) {
			for _, s := range ss {
				if s.parent == parent || (depth == 0 && parent == "" && !ids[s.parent]) {
					fmt.Fprintf(&b, "%s- %s %q (%s)\n", strings.Repeat("  ", depth+1), s.service, s.name, s.kind)
					walk(s.id, depth+1)
				}
			}
		}
		walk("", 0)
	}
	return b.String()
}
