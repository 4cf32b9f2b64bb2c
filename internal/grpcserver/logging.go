package grpcserver

import (
	"context"
	"log/slog"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/logging"
	"google.golang.org/grpc"
)

// loggingInterceptors log one line per finished RPC, with its method, code
// and duration, at a level that follows the code (OK at info, client
// errors at warn, server errors at error). Payloads are never logged: they
// carry prompts and tool output.
func loggingInterceptors(log *slog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	l := logging.LoggerFunc(func(ctx context.Context, lvl logging.Level, msg string, fields ...any) {
		log.Log(ctx, slog.Level(lvl), msg, fields...)
	})
	opts := []logging.Option{logging.WithLogOnEvents(logging.FinishCall)}
	return logging.UnaryServerInterceptor(l, opts...), logging.StreamServerInterceptor(l, opts...)
}
