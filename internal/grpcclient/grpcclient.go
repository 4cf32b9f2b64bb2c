// Package grpcclient opens connections from one penguin service to another
// (the engine to llm and environment, the CLI to the engine) with the same
// plumbing on every side: the bearer token the other side's grpcserver
// expects, an otelgrpc stats handler so a trace continues across the hop,
// round-robin balancing over every address the target resolves to, and a
// new environment asked of the next replica when one refuses. The plumbing
// is the same whether the connection crosses the network ([New]) or stays
// inside the process ([NewInProcess]), so the all-in-one server and a
// split deployment run one client code path: the generated clients over a
// [Conn], the token, the server's interceptors and the trace.
package grpcclient

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fullstorydev/grpchan"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver/dns"

	"github.com/penguin-agent/penguin/internal/grpcflow"
)

// minResolutionInterval is how often, at most, a connection resolves its
// name again. grpc-go's default, 30 s, would leave a client of replicas
// behind a DNS name (a headless Service) calling a replica that is gone,
// or missing one that started, for up to half a minute after each change;
// a connection asks again only when a server ends a connection (a lost
// pod, grpcserver.Options.MaxConnectionAge), so a short interval costs
// few lookups.
const minResolutionInterval = 2 * time.Second

func init() {
	// grpc-go's setting is for the whole process and must be made before
	// any connection is opened; every penguin connection is opened here.
	dns.SetMinResolutionInterval(minResolutionInterval)
}

// Options configure a connection.
type Options struct {
	// Token, when not empty, is sent with every RPC as
	// "authorization: Bearer <token>".
	Token string
	// TracerProvider and Propagator feed the otelgrpc stats handler. Nil
	// means OpenTelemetry's global ones.
	TracerProvider trace.TracerProvider
	Propagator     propagation.TextMapPropagator
	// DialOptions are appended to the options set here. A connection in
	// the process has none: it has no transport to set up.
	DialOptions []grpc.DialOption
}

// Conn is a connection the generated clients call through, which its
// owner closes: a *grpc.ClientConn, or a connection in the process.
type Conn interface {
	grpc.ClientConnInterface
	Close() error
}

// New returns a client connection to target, a host:port or any gRPC
// target string. Like [grpc.NewClient] it does not connect until the first
// RPC, so a peer that starts later is not an error here.
//
// The connection is plaintext: penguin's services talk over loopback or a
// cluster network whose transport security, if any, comes from the
// platform (a service mesh, for instance). The token therefore travels in
// the clear on that network, which is why it guards against mistakes and
// strangers on a shared host, not against an attacker on the wire.
func New(target string, opts Options) (*grpc.ClientConn, error) {
	if strings.TrimSpace(target) == "" {
		return nil, errors.New("grpcclient: empty target")
	}
	var otelOpts []otelgrpc.Option
	if opts.TracerProvider != nil {
		otelOpts = append(otelOpts, otelgrpc.WithTracerProvider(opts.TracerProvider))
	}
	if opts.Propagator != nil {
		otelOpts = append(otelOpts, otelgrpc.WithPropagators(opts.Propagator))
	}
	dialOpts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithStatsHandler(otelgrpc.NewClientHandler(otelOpts...)),
		grpc.WithDefaultServiceConfig(serviceConfig),
	}
	// Static flow-control windows: no PING for every burst of data the
	// server sends, such as each event of a stream (internal/grpcflow).
	dialOpts = append(dialOpts, grpcflow.DialOptions()...)
	if opts.Token != "" {
		dialOpts = append(dialOpts, grpc.WithPerRPCCredentials(bearer(opts.Token)))
	}
	conn, err := grpc.NewClient(target, append(dialOpts, opts.DialOptions...)...)
	if err != nil {
		return nil, fmt.Errorf("grpcclient: dial %s: %w", target, err)
	}
	return conn, nil
}

// NewInProcess returns a connection through ch, a server's in-process
// channel (grpcserver.Server.InProcess), that sends opts.Token with every
// call as New's connections do. Its messages are never encoded. The
// trace continues through the server's own stats handlers, which see both
// ends of each call, so opts' tracer and propagator are not used;
// balancing and retries have nothing to choose between. Close does
// nothing: the channel lives as long as its server.
func NewInProcess(ch grpc.ClientConnInterface, opts Options) Conn {
	conn := inProcess{ClientConnInterface: ch}
	if opts.Token != "" {
		creds := grpc.PerRPCCredentials(bearer(opts.Token))
		conn.ClientConnInterface = grpchan.InterceptClientConn(ch,
			func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
				return invoker(ctx, method, req, reply, cc, append(opts, creds)...)
			},
			func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
				return streamer(ctx, desc, cc, method, append(opts, creds)...)
			})
	}
	return conn
}

// inProcess is a connection in the process.
type inProcess struct{ grpc.ClientConnInterface }

func (inProcess) Close() error { return nil }

// serviceConfig is the default service config of every connection.
//
// Calls go to every address the target resolves to in turn (round_robin),
// instead of grpc-go's default of the first address only. A target such
// as dns:///penguin-llm:7421 (a headless Service, one address per pod) so
// spreads its calls over every replica; when a replica's server closes an
// aged connection (grpcserver.Options.MaxConnectionAge) the name is
// resolved again, so replicas that started later get calls too. A single
// address behaves as before.
//
// CreateEnvironment refused as Unavailable (a replica that is shutting
// down, or gone) is tried again, on the next replica, for up to about
// eight seconds, time for the name to be resolved again: no environment
// was made, and the engine would otherwise fail the tool call that needed
// it.
// gRPC never retries a call once the server has answered anything, and
// no other method is retried.
//
// Options.DialOptions may set another config.
const serviceConfig = `{
	"loadBalancingConfig": [{"round_robin": {}}],
	"methodConfig": [{
		"name": [{"service": "penguin.v1.EnvironmentService", "method": "CreateEnvironment"}],
		"retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.5s", "maxBackoff": "4s", "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
	}]
}`

// bearer sends a fixed bearer token with every RPC.
type bearer string

// GetRequestMetadata implements [google.golang.org/grpc/credentials.PerRPCCredentials].
func (b bearer) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + string(b)}, nil
}

// RequireTransportSecurity implements
// [google.golang.org/grpc/credentials.PerRPCCredentials]. It returns false
// because the connection is plaintext by design; see [New].
func (bearer) RequireTransportSecurity() bool { return false }
