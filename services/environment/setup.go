package environment

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/penguin-agent/penguin/internal/logger"
	"github.com/penguin-agent/penguin/services/environment/checkpoint"
	"github.com/penguin-agent/penguin/services/environment/sandbox"
)

// Config is what a process needs to stand the service up the standard way:
// `penguin serve environment`, the all-in-one `penguin serve` and the
// server a client command embeds all use [Setup].
type Config struct {
	// Root is the directory every workspace must lie under; empty means
	// the current directory. The root "/" lets workspaces lie anywhere (a
	// client's embedded server).
	Root string
	// ScratchDir holds the archives of truncated output (see
	// [Options.ScratchDir]); empty means DefaultScratchDir(Root), outside
	// every workspace.
	ScratchDir string
	// Advertise is the address at which engines reach the environments
	// this replica creates (see [Options.Advertise]); empty when there is
	// one replica.
	Advertise string
	// NoCgroups tracks commands by process group and session only (see
	// [Options.NoCgroups]).
	NoCgroups bool
	// DefaultSandbox and DefaultNetwork are the sandbox of environments
	// that do not ask for one (see [Options.DefaultSandbox]); empty means
	// workspace-write without network where the host can enforce it.
	DefaultSandbox, DefaultNetwork string
	// SandboxRequired refuses sandbox mode none (see
	// [Options.SandboxRequired]).
	SandboxRequired bool
	// SandboxUser is "UID" or "UID:GID", who confined commands run as;
	// empty means sandbox.DefaultIdentity.
	SandboxUser string
	// Limits bound each environment; zero fields mean
	// sandbox.DefaultLimits.
	Limits sandbox.Limits
	// CheckpointRetention bounds each workspace's checkpoints (see
	// [Options.CheckpointRetention]); zero fields mean
	// checkpoint.DefaultRetention's.
	CheckpointRetention checkpoint.Retention
	// HidePaths are files confined commands see empty: the auth token
	// file belongs here.
	HidePaths []string
	// WritablePaths are further directories confined commands may write.
	WritablePaths []string
	// Version identifies penguin to MCP servers.
	Version string
	// Logger receives the service's events; nil discards them.
	Logger *slog.Logger
	// Registerer receives the service's metrics; nil keeps them
	// unregistered.
	Registerer prometheus.Registerer
}

// Setup ends the processes a crashed predecessor left in command cgroups,
// logs how commands will be tracked, and returns the service with the
// function that releases it: that function disposes every environment
// (ending every process the service started), then removes the cgroups
// kept for reuse. It is idempotent; the caller runs it when the server
// stops.
func Setup(cfg Config) (*Service, func() error, error) {
	log := logger.OrDiscard(cfg.Logger)
	root := cfg.Root
	if root == "" {
		root = "."
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return nil, nil, fmt.Errorf("root: %w", err)
	}
	var user sandbox.Identity
	if cfg.SandboxUser != "" {
		if user, err = sandbox.ParseIdentity(cfg.SandboxUser); err != nil {
			return nil, nil, err
		}
	}
	sweepCgroups(log)
	logTracking(log, cfg.NoCgroups)
	if _, why := sandbox.Trampoline(); why != "" {
		log.Info(why)
	}
	svc, err := New(Options{
		Root:                root,
		ScratchDir:          cfg.ScratchDir,
		NoCgroups:           cfg.NoCgroups,
		DefaultSandbox:      cfg.DefaultSandbox,
		DefaultNetwork:      cfg.DefaultNetwork,
		SandboxRequired:     cfg.SandboxRequired,
		SandboxUser:         user,
		Limits:              cfg.Limits,
		CheckpointRetention: cfg.CheckpointRetention,
		HidePaths:           cfg.HidePaths,
		WritablePaths:       cfg.WritablePaths,
		Advertise:           cfg.Advertise,
		Logger:              log,
		Version:             cfg.Version,
		Registerer:          cfg.Registerer,
	})
	if err != nil {
		return nil, nil, err
	}
	return svc, func() error { svc.Close(); return sandbox.DrainCgroupPool() }, nil
}

// sweepCgroups ends the processes that a crashed predecessor left in
// their cgroups.
func sweepCgroups(log *slog.Logger) {
	if n, err := sandbox.SweepCgroups(); err != nil {
		log.Warn("sweeping leftover command cgroups", "error", err)
	} else if n > 0 {
		log.Info("removed command cgroups left by a previous run", "count", n)
	}
}

// logTracking says once, at start, how commands will be tracked, since it
// decides whether a double-forked daemon survives a kill.
func logTracking(log *slog.Logger, noCgroups bool) {
	if dir, err := sandbox.CgroupParent(); noCgroups {
		log.Info("commands are tracked by process group and session (--no-cgroups)")
	} else if err != nil {
		log.Info("commands are tracked by process group and session (no per-command cgroups)", "reason", err)
	} else {
		log.Info("commands are tracked by per-command cgroups", "parent", dir)
	}
}
