package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/penguin-agent/penguin/internal/assemble"
	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/internal/grpcserver"
	"github.com/spf13/pflag"
)

// serverFlags are the flags every `penguin serve` variant has, so the four
// server commands spell and document them the same way.
type serverFlags struct {
	listen          string
	metricsListen   string
	profilesListen  string
	authTokenFile   string
	shutdownTimeout time.Duration
	slowCall        time.Duration
	maxConnAge      time.Duration
}

// addServerFlags defines the common server flags on fs, with defaultListen
// as the gRPC address.
func addServerFlags(fs *pflag.FlagSet, defaultListen string) *serverFlags {
	f := &serverFlags{}
	fs.StringVar(&f.listen, "listen", defaultListen, "gRPC address to listen on")
	fs.StringVar(&f.metricsListen, "metrics-listen", "", "address to serve Prometheus /metrics on; empty turns it off")
	fs.StringVar(&f.profilesListen, "pprof-listen", "", "loopback address to serve Go's runtime profiles on (/debug/pprof/), for performance work; empty turns it off")
	fs.StringVar(&f.authTokenFile, "auth-token-file", "", "file holding the bearer token clients must present (or set PENGUIN_AUTH_TOKEN)")
	fs.DurationVar(&f.shutdownTimeout, "shutdown-timeout", grpcserver.DefaultShutdownTimeout, "how long a graceful stop may take")
	fs.DurationVar(&f.slowCall, "slow-call", grpcserver.DefaultSlowCall, "log a successful unary call at info when it takes this long (others at debug); 0 or less logs none as slow")
	fs.DurationVar(&f.maxConnAge, "max-connection-age", 0, "close client connections gracefully at this age, so clients of several replicas resolve their name again and find new ones; 0 keeps them")
	return f
}

// process turns the common flags, PENGUIN_LOG_* and PENGUIN_AUTH_TOKEN
// into the Config of a process called name, without its services.
func (f *serverFlags) process(name string) (assemble.Config, error) {
	log, err := config.LoggerFromEnv(os.Stderr, os.LookupEnv)
	if err != nil {
		return assemble.Config{}, err
	}
	token, err := config.Secret(os.LookupEnv, "PENGUIN_AUTH_TOKEN", f.authTokenFile)
	if err != nil {
		return assemble.Config{}, fmt.Errorf("auth token: %w", err)
	}
	slow := f.slowCall
	if slow <= 0 {
		slow = -1 // off for the operator; zero means "default" to grpcserver
	}
	return assemble.Config{
		Name: name, Version: penguinVersion(), Listen: f.listen, MetricsListen: f.metricsListen, ProfilesListen: f.profilesListen,
		AuthToken: token, Logger: log, ShutdownTimeout: f.shutdownTimeout, SlowCall: slow,
		MaxConnectionAge: f.maxConnAge,
	}, nil
}

// secretFiles are the files of credentials this server reads, which its
// environments' confined commands must see empty.
func (f *serverFlags) secretFiles() []string {
	if f.authTokenFile == "" {
		return nil
	}
	if abs, err := filepath.Abs(f.authTokenFile); err == nil {
		return []string{abs}
	}
	return []string{f.authTokenFile}
}

// serveProcess builds the process cfg describes and serves it until ctx
// ends; command names the command in errors. A server gives back the
// memory its start-up used before it reports ready
// (assemble.Config.ReleaseStartup); a client command's embedded server,
// which lives as long as one task, does not.
func serveProcess(ctx context.Context, command string, cfg assemble.Config) error {
	cfg.ReleaseStartup = true
	p, err := assemble.New(ctx, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", command, err)
	}
	return p.Serve(ctx)
}

// embeddedLogFile is the file, in the data directory, that a client
// command's embedded server logs to.
const embeddedLogFile = "client.log"

// embeddedLogMax is the size past which the log file is started afresh
// (the previous one kept as client.log.1), so it stays bounded.
const embeddedLogMax = 8 << 20

// embeddedLogger is the logger of a client command's embedded server. The
// terminal belongs to the conversation, so its lines go to client.log in
// the data directory instead (readable by the owner only: a log line may
// quote a prompt), at warn unless PENGUIN_LOG_LEVEL asks for more.
func embeddedLogger(home string) (*slog.Logger, func() error, error) {
	path := filepath.Join(home, embeddedLogFile)
	if fi, err := os.Stat(path); err == nil && fi.Size() > embeddedLogMax {
		_ = os.Rename(path, path+".1")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded server log: %w", err)
	}
	lookup := os.LookupEnv
	if _, set := os.LookupEnv(config.EnvLogLevel); !set {
		lookup = func(k string) (string, bool) {
			if k == config.EnvLogLevel {
				return "warn", true
			}
			return os.LookupEnv(k)
		}
	}
	log, err := config.LoggerFromEnv(f, lookup)
	if err != nil {
		return nil, nil, errors.Join(err, f.Close())
	}
	return log, f.Close, nil
}
