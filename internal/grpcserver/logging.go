package grpcserver

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// DefaultSlowCall is how long a unary call may take before it is logged
// at info even when it succeeds, when [Options] sets no threshold. Every
// unary call of the three services answers from memory or a local
// database in milliseconds; one that takes a second is worth a line.
const DefaultSlowCall = time.Second

// callLogger logs one line per finished RPC, with its method, code and
// duration, at a level that says whether an operator needs it (see
// level): a successful call is debug, since a busy server makes many
// (about nine per agent task). Payloads are never logged: they carry
// prompts and tool output.
//
// It is written here rather than taken from go-grpc-middleware's logging
// interceptor (whose level table it reuses), which picks the level from the code alone, so it cannot
// tell a slow call, and builds its fields (start time, peer address) for
// every call before asking whether the line will be written. Here a
// successful call that nobody logs costs one Enabled check.
type callLogger struct {
	log *slog.Logger
	// slow is the threshold of slow unary calls; zero or less logs none
	// as slow.
	slow time.Duration
}

// loggingInterceptors returns the interceptors of a callLogger.
func loggingInterceptors(log *slog.Logger, slow time.Duration) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	l := &callLogger{log: log, slow: slow}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		start := time.Now()
		resp, err := handler(ctx, req)
		l.finished(ctx, info.FullMethod, "unary", start, err)
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		start := time.Now()
		err := handler(srv, ss)
		l.finished(ss.Context(), info.FullMethod, streamType(info), start, err)
		return err
	}
	return unary, stream
}

// level is the level of a call's line: debug for a success, info for a
// slow success, and go-grpc-middleware's server table for the errors
// (client mistakes at info, trouble at warn or error). Only unary calls
// can be slow: a stream lasts as long as its caller wants (an agent run, a
// watch), so its length says nothing about the server. For the same
// reason a stream its client cancelled is debug: cancelling is how a
// watch ends (the engine ends its watch of each environment so, once per
// task), and a line for each would bury the ones an operator needs.
func (l *callLogger) level(code codes.Code, took time.Duration, unary bool) slog.Level {
	switch {
	case code == codes.Canceled && !unary:
		return slog.LevelDebug
	case code != codes.OK:
		return slog.Level(logging.DefaultServerCodeToLevel(code))
	case unary && l.slow > 0 && took >= l.slow:
		return slog.LevelInfo
	default:
		return slog.LevelDebug
	}
}

// finished writes the line of a call that started at start and ended
// with err, when the logger takes its level.
func (l *callLogger) finished(ctx context.Context, fullMethod, methodType string, start time.Time, err error) {
	took := time.Since(start)
	code := status.Code(err)
	lvl := l.level(code, took, methodType == "unary")
	if !l.log.Enabled(ctx, lvl) {
		return
	}
	service, method := splitMethod(fullMethod)
	attrs := make([]slog.Attr, 0, 8)
	attrs = append(attrs,
		slog.String("grpc.service", service),
		slog.String("grpc.method", method),
		slog.String("grpc.method_type", methodType),
		slog.String("grpc.code", code.String()),
		slog.Float64("grpc.time_ms", float64(took.Microseconds())/1000),
	)
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		attrs = append(attrs, slog.String("peer.address", p.Addr.String()))
	}
	if err != nil {
		attrs = append(attrs, slog.String("grpc.error", status.Convert(err).Message()))
	}
	msg := "finished call"
	if code == codes.OK && lvl == slog.LevelInfo {
		msg = "slow call"
		attrs = append(attrs, slog.Duration("slow_call_threshold", l.slow))
	}
	l.log.LogAttrs(ctx, lvl, msg, attrs...)
}

// splitMethod turns "/pkg.Service/Method" into its two names.
func splitMethod(full string) (service, method string) {
	service, method, ok := strings.Cut(strings.TrimPrefix(full, "/"), "/")
	if !ok {
		return "", full
	}
	return service, method
}

// streamType names a stream's kind as the gRPC documentation does.
func streamType(info *grpc.StreamServerInfo) string {
	switch {
	case info.IsClientStream && info.IsServerStream:
		return "bidi_stream"
	case info.IsClientStream:
		return "client_stream"
	default:
		return "server_stream"
	}
}
