// Command floorserver runs the floor server of e2e/bench/floor as a
// process of its own, so that the task benchmark measures its CPU from
// /proc as it measures Penguin's:
//
//	floorserver --listen ADDR --model-url URL --plan FILE [--db FILE] [--cpu-profile FILE]
//	floorserver --version
//
// With --version it prints the Go version it was built with and exits:
// the benchmark's measure of what starting this binary costs (its exec
// and package initialization) beside `penguin version`'s.
//
// Without --db it records nothing. It logs "floor listening" with the
// address once it serves, and on SIGTERM or SIGINT stops and logs "floor
// stopped" with what it did (tasks, model calls, reads, commits), which
// the benchmark checks.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/penguin-agent/penguin/e2e/bench/floor"
	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/grpcflow"
)

func main() {
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("floor failed", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	listen := flag.String("listen", "127.0.0.1:0", "gRPC address")
	modelURL := flag.String("model-url", "", "the model's OpenAI-compatible base URL, such as http://host/v1")
	planPath := flag.String("plan", "", "the plan (JSON) the benchmark took from Penguin")
	dbPath := flag.String("db", "", "the SQLite database to record in; empty records nothing")
	profile := flag.String("cpu-profile", "", "write a CPU profile of the whole run to this file")
	version := flag.Bool("version", false, "print the Go version and exit")
	flag.Parse()
	if *version {
		_, err := fmt.Println("floorserver", runtime.Version())
		return err
	}
	if *modelURL == "" || *planPath == "" {
		return errors.New("--model-url and --plan are required")
	}
	if *profile != "" {
		f, err := os.Create(*profile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		// Stopped after the last task, before the profile's file is
		// closed, whichever way run returns.
		defer func() {
			pprof.StopCPUProfile()
			if err := f.Close(); err != nil {
				log.Error("cpu profile", "error", err)
			}
		}()
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	plan, err := floor.ReadPlan(*planPath)
	if err != nil {
		return err
	}
	var store *floor.Store
	if *dbPath != "" {
		if store, err = floor.OpenStore(ctx, *dbPath, log); err != nil {
			return err
		}
	}
	srv, err := floor.New(plan, *modelURL, store)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	// Penguin's server settings that concern the task: the static
	// flow-control windows and a stream worker per CPU
	// (internal/grpcserver); none of its interceptors.
	g := grpc.NewServer(append(grpcflow.ServerOptions(), grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))))...)
	penguinv1.RegisterEngineServiceServer(g, srv)
	healthpb.RegisterHealthServer(g, health.NewServer())
	served := make(chan error, 1)
	go func() { served <- g.Serve(ln) }()
	log.Info("floor listening", "addr", ln.Addr().String(), "store", store != nil)
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	g.GracefulStop()
	if store != nil {
		err = errors.Join(err, store.Close())
	}
	c := srv.Counts()
	log.Info("floor stopped", "tasks", c.Tasks, "model_calls", c.ModelCalls, "reads", c.Reads, "commits", c.Commits)
	return err
}
