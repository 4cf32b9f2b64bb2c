package engine_test

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/services/engine"
	"github.com/penguin-agent/penguin/services/engine/access"
	"github.com/penguin-agent/penguin/services/engine/internal/fake"
	"github.com/penguin-agent/penguin/services/engine/store"
)

// readsPerTask is what a task of the end-to-end benchmark's shape reads
// here: the caller's memberships and the project's model settings at
// CreateSession; at Run the row with the caller's membership of its
// project (one statement). The row, the log and the model settings a
// Run prepares from are read on the writer's connection (PeekLease),
// not on the readers.
const readsPerTask = 3

// A task (a new session, then a Run of two model turns and one tool call)
// runs at most readsPerTask statements on the store's readers, its calls
// authorized by a local server's Guard as `penguin serve` authorizes
// them. Before the row and the membership were one statement, and the
// row and the log were read with the lease, it ran 7; before the model
// settings were read with the row (PeekLease), 4.
func TestTaskReads(t *testing.T) {
	e := newEnv(t)
	g := access.New(e.store, access.Options{Mode: access.Local})
	e.client = penguinv1.NewEngineServiceClient(dialGuarded(t, g, engine.New(e.mgr, nil, engine.WithGuard(g))))
	reply := func() []*fake.Reply {
		return []*fake.Reply{
			fake.NewReply().ToolCall("c1", "read_file", `{"path":"hello.txt"}`).Done(),
			fake.NewReply().Text("It says hello.").Done(),
		}
	}
	e.llm.Generate = fake.Script(append(reply(), reply()...)...)
	task := func() {
		id := e.create(readOnly)
		if st := end(t, e.run(id, "Read hello.txt and tell me what it says")); st.GetStatus() != completedS {
			t.Fatalf("the task ended %v: %s", st.GetStatus(), st.GetMessage())
		}
	}
	task() // the first session of a spec also learns the tools
	c := e.store.(store.ReadCounter)
	before := c.Reads()
	task()
	if n := c.Reads() - before; n > readsPerTask {
		t.Fatalf("a task ran %d statements on the store's readers, want at most %d", n, readsPerTask)
	}
}

// dialGuarded serves srv over an in-memory connection behind g's
// authentication, as the server's interceptors put it.
func dialGuarded(t *testing.T, g *access.Guard, srv penguinv1.EngineServiceServer) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	s := grpc.NewServer(
		grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			ctx, err := g.Authenticate(ctx, info.FullMethod)
			if err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.StreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			ctx, err := g.Authenticate(ss.Context(), info.FullMethod)
			if err != nil {
				return err
			}
			return h(srv, &callerStream{ServerStream: ss, ctx: ctx})
		}))
	penguinv1.RegisterEngineServiceServer(s, srv)
	go func() { _ = s.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
	})
	return conn
}

// callerStream is a server stream whose context carries the caller.
type callerStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *callerStream) Context() context.Context { return s.ctx }
