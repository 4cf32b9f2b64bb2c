package grpcserver

import (
	"context"
	"time"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors"
	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/selector"
	"github.com/penguin-agent/penguin/internal/enumcheck"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// interceptors composes the server's interceptor chains, outermost first.
// This is the one place that decides their order:
//
//  1. metrics, so every RPC is counted, including those refused by auth;
//  2. logging, so refused and failed RPCs are logged with their code
//     (health checks are left out: probes would drown everything else;
//     see callLogger for the levels);
//  3. auth (auth.go: the authenticator, or the token), so nothing below
//     runs for an unauthenticated caller, and every handler finds its
//     caller in its context (health checks are exempt so probes need no
//     secret);
//     Then the authenticator's Authorize, when it has one, checks the
//     request's session or project against the caller's access;
//  4. the enum check (enumcheck), so no handler of any service sees an
//     enum value its contract does not declare;
//  5. recovery, innermost, so a panicking handler becomes codes.Internal
//     that logging and metrics then see like any other failure.
func (s *Server) interceptors(authToken string, slowCall time.Duration) ([]grpc.UnaryServerInterceptor, []grpc.StreamServerInterceptor) {
	var unary []grpc.UnaryServerInterceptor
	var stream []grpc.StreamServerInterceptor

	if s.metrics != nil {
		unary = append(unary, s.metrics.UnaryServerInterceptor())
		stream = append(stream, s.metrics.StreamServerInterceptor())
	}

	logU, logS := loggingInterceptors(s.log, slowCall)
	unary = append(unary, selector.UnaryServerInterceptor(logU, notHealth))
	stream = append(stream, selector.StreamServerInterceptor(logS, notHealth))

	authU, authS := s.authInterceptors(authToken)
	unary = append(unary, selector.UnaryServerInterceptor(authU, notHealth))
	stream = append(stream, selector.StreamServerInterceptor(authS, notHealth))
	authzU, authzS := s.authorizeInterceptors()
	unary = append(unary, selector.UnaryServerInterceptor(authzU, notHealth))
	stream = append(stream, selector.StreamServerInterceptor(authzS, notHealth))

	unary = append(unary, enumcheck.UnaryServerInterceptor())
	stream = append(stream, enumcheck.StreamServerInterceptor())

	recU, recS := recoveryInterceptors(s.log)
	unary = append(unary, recU)
	stream = append(stream, recS)
	return unary, stream
}

// notHealth matches every RPC except those of the gRPC health service.
var notHealth = selector.MatchFunc(func(_ context.Context, c interceptors.CallMeta) bool {
	return c.Service != healthpb.Health_ServiceDesc.ServiceName
})
