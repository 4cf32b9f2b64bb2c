package llm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/signal"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm/providers"
	"github.com/penguin-agent/penguin/services/llm/registry"
)

// DefaultWatchInterval is how often [Service.Watch] looks at the providers
// file and its key files.
const DefaultWatchInterval = 2 * time.Second

// routeSource builds the routes: the providers file's, then the presets
// of the environment that the file does not name.
type routeSource struct {
	file   string
	lookup config.LookupFunc
	deps   providers.Deps

	mu   sync.Mutex // one build at a time; guards seen
	seen string     // the fingerprint taken before the last build read the files
}

// build reads the file (absent: none) and the environment and builds a
// fresh registry, or fails without side effects. The files' fingerprint is
// taken first, so a change made while they are read shows at the next look.
func (src *routeSource) build() (*registry.Registry, error) {
	src.mu.Lock()
	defer src.mu.Unlock()
	src.seen = src.fingerprint()
	f := &providers.File{}
	if src.file != "" {
		loaded, err := providers.Load(src.file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			f = loaded
		}
	}
	env, err := providers.FromEnv(src.lookup, src.deps.Catalog)
	if err != nil {
		return nil, err
	}
	for _, p := range env.Providers {
		if !slices.ContainsFunc(f.Providers, func(q providers.Provider) bool { return q.Name == p.Name }) {
			f.Providers = append(f.Providers, p)
		}
	}
	reg := registry.New()
	if len(f.Providers) == 0 {
		return reg, nil
	}
	if err := providers.Build(f, reg, src.deps); err != nil {
		return nil, err
	}
	return reg, nil
}

// fingerprint is what a change of the providers file or of one of its key
// files alters: each file's size and modification time, or its absence.
func (src *routeSource) fingerprint() string {
	if src.file == "" {
		return ""
	}
	stamp := func(path string) string {
		st, err := os.Stat(path)
		if err != nil {
			return path + ":absent;"
		}
		return fmt.Sprintf("%s:%d:%d;", path, st.Size(), st.ModTime().UnixNano())
	}
	fp := stamp(src.file)
	if f, err := providers.Load(src.file); err == nil {
		for _, p := range f.Providers {
			if p.APIKeyFile != "" {
				fp += stamp(p.APIKeyFile)
			}
		}
	}
	return fp
}

// Reload builds the routes afresh from the providers file and the
// environment and puts them in place at once: a request sees the old
// routes or the new ones, never a mix. When the file is invalid (or a key
// file it names is missing), the routes in use stay, and the error is
// returned, logged, and reported by ListProviders until a reload succeeds.
func (s *Service) Reload() error {
	if s.source == nil {
		return errors.New("llm: this service was not built by Setup and has nothing to reload from")
	}
	reg, err := s.source.build()
	if err != nil {
		s.reloadErr.Store(&err)
		s.log.Error("the providers configuration is invalid; the routes in use stay", "file", s.source.file, "error", err)
		return err
	}
	s.reloadErr.Store(nil)
	old := s.routes.Swap(reg)
	s.log.Info("provider routes reloaded", "file", s.source.file, "routes", reg.Names(), "before", old.Names())
	return nil
}

// Watch reloads the routes when the providers file or a key file it names
// changes (it looks every interval; DefaultWatchInterval when zero) and on
// SIGHUP, until ctx ends.
//
// It polls rather than using inotify (fsnotify): the file may not exist
// yet (the first run, before the web app writes it), editors and the web
// app replace it by renaming a new file over it, and the key files may
// live in other directories; a stat of a few files every two seconds sees
// all of that with no watch to re-arm, and costs nothing measurable.
func (s *Service) Watch(ctx context.Context, interval time.Duration) {
	if s.source == nil {
		return
	}
	if interval <= 0 {
		interval = DefaultWatchInterval
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			s.log.Info("SIGHUP: reloading the provider routes")
			_ = s.Reload()
		case <-tick.C:
			if s.source.changed() {
				_ = s.Reload()
			}
		}
	}
}

// changed reports whether the files differ from what the last build read.
func (src *routeSource) changed() bool {
	src.mu.Lock()
	defer src.mu.Unlock()
	return src.fingerprint() != src.seen
}
