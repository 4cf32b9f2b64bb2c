package grpcserver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	grpccodes "google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
)

// BenchmarkSuccessfulCallLogging measures what logging costs a successful
// unary call on a server logging at info, where the line is not written:
// go-grpc-middleware's interceptor with successes at debug (the baseline:
// the best the library can do) against callLogger. It reports each one's
// ns per call and their ratio.
func BenchmarkSuccessfulCallLogging(b *testing.B) {
	log := slog.New(slog.NewJSONHandler(io.Discard, nil)) // info
	lib := logging.UnaryServerInterceptor(logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(lvl), msg, fields...)
	}), logging.WithLogOnEvents(logging.FinishCall), logging.WithLevels(func(c grpccodes.Code) logging.Level {
		if c == grpccodes.OK {
			return logging.LevelDebug
		}
		return logging.DefaultServerCodeToLevel(c)
	}))
	ours, _ := loggingInterceptors(log, DefaultSlowCall)
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 7420}})
	info := &grpc.UnaryServerInfo{FullMethod: "/penguin.v1.LLMService/ListProviders"}
	handler := func(context.Context, any) (any, error) { return nil, nil }

	var libTime, ourTime time.Duration
	for i := 0; b.Loop(); i++ {
		// Alternate the order so that neither always runs second.
		first, second := lib, ours
		firstTime, secondTime := &libTime, &ourTime
		if i%2 == 1 {
			first, second, firstTime, secondTime = ours, lib, &ourTime, &libTime
		}
		start := time.Now()
		_, _ = first(ctx, nil, info, handler)
		*firstTime += time.Since(start)
		start = time.Now()
		_, _ = second(ctx, nil, info, handler)
		*secondTime += time.Since(start)
	}
	b.ReportMetric(float64(libTime.Nanoseconds())/float64(b.N), "middleware-ns/call")
	b.ReportMetric(float64(ourTime.Nanoseconds())/float64(b.N), "ours-ns/call")
	b.ReportMetric(float64(ourTime)/float64(libTime), "ours/middleware")
}
