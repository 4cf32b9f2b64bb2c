package grpcserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// authInterceptors refuse, with codes.Unauthenticated, every RPC that does
// not carry "authorization: Bearer <token>" metadata with the expected
// token. Both tokens are hashed before the constant-time comparison, so
// neither the content nor the length of the secret leaks through timing.
func authInterceptors(token string) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	want := sha256.Sum256([]byte(token))
	check := func(ctx context.Context) (context.Context, error) {
		got, err := auth.AuthFromMD(ctx, "bearer")
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256([]byte(got))
		if subtle.ConstantTimeCompare(sum[:], want[:]) != 1 {
			return nil, status.Error(codes.Unauthenticated, "invalid bearer token")
		}
		return ctx, nil
	}
	return auth.UnaryServerInterceptor(check), auth.StreamServerInterceptor(check)
}
