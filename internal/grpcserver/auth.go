package grpcserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"sync/atomic"

	"github.com/grpc-ecosystem/go-grpc-middleware/v2/interceptors/auth"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Authenticator resolves who makes a call. The engine's access.Guard is
// one: it reads the call's credentials (a user's token or sign-in, the
// service token) and returns a context that carries the caller, or an
// error (Unauthenticated, PermissionDenied) that refuses the call.
type Authenticator interface {
	Authenticate(ctx context.Context, fullMethod string) (context.Context, error)
}

// Authorizer, when an Authenticator is one too, checks each call's
// request (the first, for a stream) before its handler sees it.
type Authorizer interface {
	Authorize(ctx context.Context, fullMethod string, req any) error
}

// Auditor, when an Authenticator is one too, sees each unary call's
// request and outcome after its handler ran, to record it in the audit
// log.
type Auditor interface {
	AuditCall(ctx context.Context, fullMethod string, req any, err error)
}

// StreamWatcher, when an Authenticator is one too, keeps the access of
// an open stream under watch once its first request was authorized: a
// stream outlives the check made when it opened, and a caller who loses
// access (removed from the project, account disabled, token revoked,
// signed out) must not go on receiving it. WatchStream blocks until the
// caller's access to the call ends, returning the error the stream is to
// end with, or until ctx ends, returning nil. Watches reports whether the
// caller of ctx (as the authenticator put it there) could lose access
// while the server runs: a stream of a caller who cannot (the service
// token's, such as the engine's own calls to the other services) is not
// watched, and its context is left as it is.
type StreamWatcher interface {
	Watches(ctx context.Context) bool
	WatchStream(ctx context.Context, fullMethod string, req any) error
}

// SetAuthenticator makes a decide who may call, instead of the bare token
// check of [Options.AuthToken]. Call it before [Server.Serve]: a process
// sets it once the service that owns the users (the engine) is built.
func (s *Server) SetAuthenticator(a Authenticator) {
	s.authn.Store(&a)
}

// authInterceptors refuse every RPC (but the health service's, see
// interceptors) that its authenticator refuses. Without an authenticator,
// a call must carry "authorization: Bearer <token>" metadata with the
// expected token, when one is set (codes.Unauthenticated otherwise). Both
// tokens are hashed before the constant-time comparison, so neither the
// content nor the length of the secret leaks through timing.
func (s *Server) authInterceptors(token string) (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	want := sha256.Sum256([]byte(token))
	check := func(ctx context.Context) (context.Context, error) {
		if a := s.authn.Load(); a != nil {
			method, _ := grpc.Method(ctx)
			return (*a).Authenticate(ctx, method)
		}
		if token == "" {
			return ctx, nil
		}
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

// authorizeInterceptors hand each call's request to the authenticator's
// Authorize, when it has one, before the handler runs, and a unary call's
// outcome to its AuditCall, when it has one, after.
func (s *Server) authorizeInterceptors() (grpc.UnaryServerInterceptor, grpc.StreamServerInterceptor) {
	authorizer := func() Authorizer {
		if a := s.authn.Load(); a != nil {
			if z, ok := (*a).(Authorizer); ok {
				return z
			}
		}
		return nil
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		if z := authorizer(); z != nil {
			if err := z.Authorize(ctx, info.FullMethod, req); err != nil {
				return nil, err
			}
		}
		resp, err := handler(ctx, req)
		if a := s.authn.Load(); a != nil {
			if au, ok := (*a).(Auditor); ok {
				au.AuditCall(ctx, info.FullMethod, req, err)
			}
		}
		return resp, err
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		z := authorizer()
		if z == nil {
			return handler(srv, ss)
		}
		w, ok := z.(StreamWatcher)
		if !ok || !info.IsServerStream || !w.Watches(ss.Context()) {
			// Nothing can end the caller's access: the first request is
			// authorized, and the stream needs no context of its own,
			// nor a goroutine to watch it.
			return handler(srv, &authorizedStream{ServerStream: ss, ctx: ss.Context(), z: z, method: info.FullMethod})
		}
		ctx, cancel := context.WithCancelCause(ss.Context())
		defer cancel(nil)
		as := &authorizedStream{ServerStream: ss, ctx: ctx, z: z, method: info.FullMethod}
		as.watch = func(req any) {
			go func() {
				if err := w.WatchStream(ctx, info.FullMethod, req); err != nil {
					as.ended.Store(&err)
					cancel(err)
				}
			}()
		}
		err := handler(srv, as)
		if ended := as.ended.Load(); ended != nil {
			// The handler returned because its context ended (or
			// raced it to the end); the caller is told why.
			return *ended
		}
		return err
	}
	return unary, stream
}

// authorizedStream authorizes the first message a stream receives and,
// when its authorizer watches streams, has the access of the caller
// watched from then on: the handler's context ends when it does.
type authorizedStream struct {
	grpc.ServerStream
	ctx    context.Context
	z      Authorizer
	method string
	done   bool
	// watch starts watching the stream's access to the request it is
	// given; nil when nothing watches.
	watch func(req any)
	// ended is the error the watch ended the stream with.
	ended atomic.Pointer[error]
}

// Context implements grpc.ServerStream: the stream's context, which ends
// too when the caller's access does.
func (a *authorizedStream) Context() context.Context { return a.ctx }

// RecvMsg implements grpc.ServerStream.
func (a *authorizedStream) RecvMsg(m any) error {
	if err := a.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	if a.done {
		return nil
	}
	a.done = true
	if err := a.z.Authorize(a.Context(), a.method, m); err != nil {
		return err
	}
	if a.watch != nil {
		a.watch(m)
	}
	return nil
}
