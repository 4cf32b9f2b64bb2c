package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	penguinv1 "github.com/penguin-agent/penguin/gen/penguin/v1"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/environment"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// serveEnvironment runs the environment service alone, for a deployment
// where sandboxes scale on their own: `penguin serve environment --listen
// ADDR --root DIR`. Every workspace must lie under the root. A graceful
// stop disposes every environment first, which ends every process the
// service started, then drains the remaining calls.
func serveEnvironment(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("penguin serve environment", flag.ContinueOnError)
	common := addServerFlags(fs, "127.0.0.1:7422")
	root := fs.String("root", "", "directory every workspace must lie under (default: the current directory)")
	advertise := fs.String("advertise", "", "the address at which engines reach the environments this replica creates, returned by CreateEnvironment (for example $(POD_IP):7422 behind a headless Service); empty when there is one replica")
	noCgroups := fs.Bool("no-cgroups", false, "track commands by process group and session only, not by per-command cgroups: faster starts, but double-forked daemons escape kills")
	if err := config.Parse(fs, args, os.LookupEnv); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("serve environment: unexpected arguments %q", fs.Args())
	}
	p, err := newServerProcess(ctx, "environment", common, nil)
	if err != nil {
		return fmt.Errorf("serve environment: %w", err)
	}
	defer p.Close(ctx)

	dir := *root
	if dir == "" {
		dir = "."
	}
	svc, closeSvc, err := newEnvironmentService(ctx, p, dir, func(o *environment.Options) {
		o.NoCgroups = *noCgroups
		o.Advertise = *advertise
	})
	if err != nil {
		return fmt.Errorf("serve environment: %w", err)
	}
	defer closeSvc()
	srv, err := p.newServer()
	if err != nil {
		return err
	}
	penguinv1.RegisterEnvironmentServiceServer(srv.GRPC(), svc)
	srv.OnShutdown(func(context.Context) { _ = closeSvc() })

	lis, mlis, err := p.listeners()
	if err != nil {
		return err
	}
	p.log.Info("environment service listening", "addr", lis.Addr().String(), "advertise", *advertise, "root", svc.Root(), "auth", p.token != "")
	return p.serve(ctx, srv, lis, mlis)
}

// newEnvironmentService builds the environment service over root for the
// server process p; adjust may change the options. The returned function
// disposes every environment; it is idempotent, and the caller runs it when
// the server stops.
func newEnvironmentService(_ context.Context, p *serverProcess, root string, adjust ...func(*environment.Options)) (*environment.Service, func() error, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, fmt.Errorf("root: %w", err)
	}
	// Processes that a crashed predecessor left in their cgroups end now.
	if n, err := sandbox.SweepCgroups(); err != nil {
		p.log.Warn("sweeping leftover command cgroups", "error", err)
	} else if n > 0 {
		p.log.Info("removed command cgroups left by a previous run", "count", n)
	}
	opts := environment.Options{Root: abs, Logger: p.log, Version: version, Registerer: p.metrics}
	for _, f := range adjust {
		f(&opts)
	}
	if dir, err := sandbox.CgroupParent(); opts.NoCgroups {
		p.log.Info("commands are tracked by process group and session (--no-cgroups)")
	} else if err != nil {
		p.log.Info("commands are tracked by process group and session (no per-command cgroups)", "reason", err)
	} else {
		p.log.Info("commands are tracked by per-command cgroups", "parent", dir)
	}
	if abs == string(filepath.Separator) {
		// Workspaces may be anywhere (a client's embedded server): the
		// archives of truncated output go to the user's cache instead.
		cache, err := os.UserCacheDir()
		if err != nil {
			cache = os.TempDir()
		}
		opts.ScratchDir = filepath.Join(cache, "penguin", "scratch")
	}
	svc, err := environment.New(opts)
	if err != nil {
		return nil, nil, err
	}
	// After the last command, the cgroups kept empty for reuse go too.
	return svc, func() error { svc.Close(); return sandbox.DrainCgroupPool() }, nil
}
