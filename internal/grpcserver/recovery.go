package grpcserver

import (
	"context"
	"log/slog"
	"runtime/debug"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/recovery"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoveryInterceptors turn a panic in a handler into codes.Internal with a
// generic message, so one bad request cannot take the process down and the
// caller never sees internals. The panic value and stack go to the log.
func recoveryInterceptors(log *slog.Logger) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	handler := recovery.WithRecoveryHandlerContext(func(ctx context.Context, p any) error {
		method, _ := grpc.Method(ctx)
		log.ErrorContext(ctx, "panic in gRPC handler",
			"grpc.method", method, "panic", p, "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	})
	return recovery.UnaryServerInterceptor(handler), recovery.StreamServerInterceptor(handler)
}
