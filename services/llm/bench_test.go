package llm_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	goopenai "github.com/sashabaranov/go-openai"
	"go.opentelemetry.io/otel/trace/noop"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/penguin-agent/penguin/internal/omni"
	"github.com/penguin-agent/penguin/internal/testkit/emulator"
)

// benchStack is the gateway as deployed (gRPC bootstrap with its
// interceptors, tracing, logging and metering middleware, the OpenAI
// adapter) and a direct go-openai client, both in front of one emulator.
type benchStack struct {
	emu    *emulator.Server
	raw    *http.Client
	direct *goopenai.Client
	client penguinv1.LLMServiceClient
	// bare is the same service behind a plain grpc-go server: no
	// interceptors, no stats handler, default options.
	bare  penguinv1.LLMServiceClient
	close func()
}

func newBenchStack(b *testing.B, script emulator.Script) *benchStack {
	b.Helper()
	emu := emulator.NewServer(script, emulator.WithoutRecording())
	transport := func() *http.Transport {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 2000, 2000
		return tr
	}
	directTr, gatewayTr, rawTr := transport(), transport(), transport()
	cfg := goopenai.DefaultConfig("")
	cfg.BaseURL = emu.URL + "/v1"
	cfg.HTTPClient = &http.Client{Transport: directTr}

	metrics := prometheus.NewRegistry()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	svc := shippedService(b, "providers:\n  - name: emu\n    type: openai\n    base_url: "+emu.URL+"/v1\n",
		&http.Client{Transport: gatewayTr}, metrics, log)
	srv, err := grpcserver.New(grpcserver.Options{Name: "llm", Logger: log, Registerer: metrics, TracerProvider: noop.NewTracerProvider()})
	if err != nil {
		b.Fatal(err)
	}
	penguinv1.RegisterLLMServiceServer(srv.GRPC(), svc)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, lis) }()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	bareSrv := grpc.NewServer()
	penguinv1.RegisterLLMServiceServer(bareSrv, svc)
	bareLis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = bareSrv.Serve(bareLis) }()
	bareConn, err := grpc.NewClient(bareLis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	return &benchStack{
		emu:    emu,
		raw:    &http.Client{Transport: rawTr},
		direct: goopenai.NewClientWithConfig(cfg),
		client: penguinv1.NewLLMServiceClient(conn),
		bare:   penguinv1.NewLLMServiceClient(bareConn),
		close: func() {
			_ = conn.Close()
			_ = bareConn.Close()
			bareSrv.Stop()
			cancel()
			<-served
			emu.Close()
			directTr.CloseIdleConnections()
			rawTr.CloseIdleConnections()
			gatewayTr.CloseIdleConnections()
		},
	}
}

var benchRequest = goopenai.ChatCompletionRequest{
	Model:         "bench-model",
	Messages:      []goopenai.ChatCompletionMessage{{Role: "user", Content: "hello"}},
	StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
}

func gatewayRequest() *penguinv1.StreamGenerateRequest {
	return &penguinv1.StreamGenerateRequest{
		Model:       &penguinv1.ModelRef{Provider: "emu", ModelId: "bench-model"},
		NewMessages: []*penguinv1.OmniMessage{omni.UserText("hello")},
	}
}

// directStream reads one answer with go-openai, calling onDelta at each
// content delta, and returns how many it saw.
func directStream(ctx context.Context, c *goopenai.Client, onDelta func(time.Time)) (int, error) {
	s, err := c.CreateChatCompletionStream(ctx, benchRequest)
	if err != nil {
		return 0, err
	}
	defer s.Close()
	n := 0
	for {
		chunk, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if len(chunk.Choices) > 0 && chunk.Choices[0].Delta.Content != "" {
			n++
			onDelta(time.Now())
		}
	}
}

// rawStream reads one answer as bare SSE lines, without decoding JSON, to
// measure what the emulator and HTTP cost on their own.
func rawStream(ctx context.Context, c *http.Client, url string, onDelta func(time.Time)) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"bench-model","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hello"}]}`))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	n := 0
	for {
		line, err := r.ReadSlice('\n')
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if i := bytes.Index(line, []byte(`"content":"`)); i >= 0 && line[i+len(`"content":"`)] != '"' {
			n++
			onDelta(time.Now())
		}
	}
}

// gatewayStream reads one answer through the gRPC service, calling onDelta
// at each partial_text delta, and returns how many it saw.
func gatewayStream(ctx context.Context, c penguinv1.LLMServiceClient, onDelta func(time.Time)) (int, error) {
	s, err := c.StreamGenerate(ctx, gatewayRequest())
	if err != nil {
		return 0, err
	}
	n := 0
	for {
		f, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		if p := f.GetMessage().GetPartialText(); p != nil && p.GetEventType() == penguinv1.StreamEventType_STREAM_EVENT_TYPE_DELTA {
			n++
			onDelta(time.Now())
		}
		if o := f.GetOutcome(); o != nil && o.GetStatus() != penguinv1.StopReason_STOP_REASON_COMPLETED {
			return n, errors.New("outcome " + o.String())
		}
	}
}

func percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(p * float64(len(s)-1))
	return s[i]
}

func micros(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// BenchmarkTimeToFirstToken measures the time to the first text delta
// through the gRPC service as deployed, through the same service behind a
// bare grpc-go server (no interceptors, no stats handler: the floor of a
// gRPC stream here), and with a direct go-openai call to the same
// emulator, one stream at a time, rotating which goes first. The
// target is added-to-bare-p50-µs (the deployed server less the bare one)
// ≤ 10; added-p50-µs is what the service adds to the direct call.
func BenchmarkTimeToFirstToken(b *testing.B) {
	st := newBenchStack(b, emulator.Script{
		Turns:       []emulator.Turn{{Text: "Hello there, this is the benchmark's answer.", Usage: emulator.Usage{Input: 5, Output: 9}}},
		OnExhausted: emulator.ExhaustedRepeatLast,
	})
	defer st.close()
	ctx := context.Background()
	ttft := func(run func(context.Context, func(time.Time)) (int, error)) time.Duration {
		start := time.Now()
		var first time.Time
		if _, err := run(ctx, func(t time.Time) {
			if first.IsZero() {
				first = t
			}
		}); err != nil {
			b.Fatal(err)
		}
		return first.Sub(start)
	}
	sides := []func(context.Context, func(time.Time)) (int, error){
		func(ctx context.Context, f func(time.Time)) (int, error) { return directStream(ctx, st.direct, f) },
		func(ctx context.Context, f func(time.Time)) (int, error) { return gatewayStream(ctx, st.bare, f) },
		func(ctx context.Context, f func(time.Time)) (int, error) { return gatewayStream(ctx, st.client, f) },
	}
	for range 50 { // warm connections, pools and caches
		for _, s := range sides {
			ttft(s)
		}
	}
	times := make([][]time.Duration, len(sides))
	b.ResetTimer()
	for i := range b.N {
		for j := range sides { // rotate, so no side always runs on a warmer cache
			k := (i + j) % len(sides)
			times[k] = append(times[k], ttft(sides[k]))
		}
	}
	b.StopTimer()
	d, bare, g := times[0], times[1], times[2]
	b.ReportMetric(micros(percentile(d, 0.5)), "direct-p50-µs")
	b.ReportMetric(micros(percentile(bare, 0.5)), "bare-grpc-p50-µs")
	b.ReportMetric(micros(percentile(g, 0.5)), "gateway-p50-µs")
	b.ReportMetric(micros(percentile(g, 0.5)-percentile(bare, 0.5)), "added-to-bare-p50-µs")
	b.ReportMetric(micros(percentile(g, 0.5)-percentile(d, 0.5)), "added-p50-µs")
	b.ReportMetric(micros(percentile(g, 0.99)-percentile(d, 0.99)), "added-p99-µs")
	b.ReportMetric(float64(percentile(g, 0.5))/float64(percentile(d, 0.5)), "ttft-ratio")
}

type relayRun struct {
	cpu     time.Duration
	deltas  int
	dropped int
	gaps    []time.Duration
	wall    time.Duration
}

// relay runs n concurrent streams through one and measures them.
func relay(b *testing.B, n, want int, one func(context.Context, func(time.Time)) (int, error)) relayRun {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		run  relayRun
		errs []error
	)
	gate := make(chan struct{})
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			var last time.Time
			gaps := make([]time.Duration, 0, want)
			got, err := one(ctx, func(t time.Time) {
				if !last.IsZero() {
					gaps = append(gaps, t.Sub(last))
				}
				last = t
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			}
			run.deltas += got
			run.dropped += want - got
			run.gaps = append(run.gaps, gaps...)
		}()
	}
	cpu0, t0 := cpuTime(b), time.Now()
	close(gate)
	wg.Wait()
	run.cpu, run.wall = cpuTime(b)-cpu0, time.Since(t0)
	if len(errs) > 0 {
		b.Fatalf("%d of %d streams failed; first: %v", len(errs), n, errs[0])
	}
	return run
}

// BenchmarkRelayPacedStreams runs concurrent streams of 64 deltas paced
// 20 ms apart (1,000 as the issue asks, and 200, which a shared 2-core
// machine can keep up with) three ways against one emulator: bare HTTP with
// no JSON decoding (what the emulator and the sockets cost on their own),
// go-openai straight at the emulator (the baseline), and through the gRPC
// service. It reports the CPU per relayed token of each (process CPU from
// getrusage, so the in-process emulator's share is in every figure), the
// gateway/direct ratio, the same ratio with the bare-HTTP cost taken out of
// both, the inter-token gap the service adds at the 99th percentile, and
// the frames lost on the way, which must be zero.
func BenchmarkRelayPacedStreams(b *testing.B) {
	const deltas = 64
	for _, streams := range []int{1000, 200} {
		b.Run(fmt.Sprintf("streams=%d", streams), func(b *testing.B) {
			st := newBenchStack(b, emulator.Script{
				Turns: []emulator.Turn{{
					Text: strings.Repeat("tok ", deltas), ChunkSize: 4,
					FirstDelay: 20 * time.Millisecond, Delay: 20 * time.Millisecond,
					Usage: emulator.Usage{Input: 5, Output: deltas},
				}},
				OnExhausted: emulator.ExhaustedRepeatLast,
			})
			defer st.close()
			raw := func(ctx context.Context, f func(time.Time)) (int, error) {
				return rawStream(ctx, st.raw, st.emu.URL, f)
			}
			direct := func(ctx context.Context, f func(time.Time)) (int, error) { return directStream(ctx, st.direct, f) }
			gateway := func(ctx context.Context, f func(time.Time)) (int, error) { return gatewayStream(ctx, st.client, f) }
			// Warm up every path (connections, goroutine stacks) at a small scale.
			relay(b, 50, deltas, raw)
			relay(b, 50, deltas, direct)
			relay(b, 50, deltas, gateway)

			var r, d, g relayRun
			add := func(acc *relayRun, x relayRun) {
				acc.cpu += x.cpu
				acc.deltas += x.deltas
				acc.dropped += x.dropped
				acc.gaps = append(acc.gaps, x.gaps...)
			}
			b.ResetTimer()
			for range b.N {
				add(&r, relay(b, streams, deltas, raw))
				add(&d, relay(b, streams, deltas, direct))
				add(&g, relay(b, streams, deltas, gateway))
			}
			b.StopTimer()
			perTok := func(x relayRun) float64 { return float64(x.cpu) / float64(max(x.deltas, 1)) / 1000 }
			b.ReportMetric(perTok(r), "bare-http-cpu-µs/tok")
			b.ReportMetric(perTok(d), "direct-cpu-µs/tok")
			b.ReportMetric(perTok(g), "gateway-cpu-µs/tok")
			b.ReportMetric(perTok(g)/perTok(d), "cpu-ratio")
			b.ReportMetric((perTok(g)-perTok(r))/(perTok(d)-perTok(r)), "cpu-ratio-sans-emulator")
			b.ReportMetric(micros(percentile(d.gaps, 0.99)), "direct-gap-p99-µs")
			b.ReportMetric(micros(percentile(g.gaps, 0.99)-percentile(d.gaps, 0.99)), "added-gap-p99-µs")
			b.ReportMetric(float64(d.dropped+g.dropped), "dropped-frames")
		})
	}
}
