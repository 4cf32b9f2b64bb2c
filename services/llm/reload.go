package llm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/penguin-agent/penguin/internal/config"
	"github.com/penguin-agent/penguin/services/llm/registry"
	"github.com/penguin-agent/penguin/services/llm/routestore"
	"github.com/penguin-agent/penguin/services/llm/routing"
)

// DefaultWatchInterval is how often [Service.Watch] looks at the providers
// file and its key files.
const DefaultWatchInterval = 2 * time.Second

// DefaultStorePoll is how often [Service.Watch] asks the route store for
// its version when the service has one, and so how late a replica may be
// to use a route another replica added.
const DefaultStorePoll = time.Second

// Where a route is defined, as ListProviders reports it.
const (
	OriginFile  = "file"
	OriginEnv   = "env"
	OriginStore = "store"
)

// routeSet is the routes in use: the global ones, and for each project
// with routes of its own, the global ones beside the project's. A
// project's route shadows a global one of the same name, for that
// project's requests only.
type routeSet struct {
	global   *registry.Registry
	projects map[string]*registry.Registry
	// configured names the global routes of the providers file and the
	// environment, which the API may not add, change or remove.
	configured map[string]string
}

// of returns the routes a request of project sees.
func (rs *routeSet) of(project string) *registry.Registry {
	if r, ok := rs.projects[project]; ok {
		return r
	}
	return rs.global
}

// routeSource builds the routes: the providers file's, the presets of the
// environment that the file does not name, and the route store's.
type routeSource struct {
	file   string
	lookup config.LookupFunc
	deps   routing.Deps
	store  *routestore.Store // nil: no route store
	// storeChanged, when set, tells the watch whether the store may have
	// changed since its last look without a query (routestore's
	// ChangeCheck); nil asks the store each time.
	storeChanged func() bool
	log          *slog.Logger

	mu          sync.Mutex // one build at a time; guards seen, seenVersion and keyFiles
	seen        string     // the fingerprint taken before the last build read the files
	seenVersion int64      // the store's version the last build read
	keyFiles    keyFiles   // the key files the providers file names, by its stamp
}

// keyFiles are the key files a version of the providers file names: the
// file is parsed again only when its stamp (size, modification time)
// changes, not at each check of the watch, which runs every second.
type keyFiles struct {
	of    string // the providers file's stamp when it was parsed
	paths []string
}

// build reads the file (absent: none), the environment and the store, and
// builds fresh registries, or fails without side effects. The files'
// fingerprint is taken first, so a change made while they are read shows
// at the next look. A stored route that cannot be built (its key does not
// open, say) is left out and logged: one project's broken route must not
// take everyone's away.
func (src *routeSource) build(ctx context.Context) (*routeSet, error) {
	src.mu.Lock()
	defer src.mu.Unlock()
	fp := src.fingerprint()
	f := &routing.File{}
	if src.file != "" {
		loaded, err := routing.Load(src.file)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			return nil, err
		default:
			f = loaded
		}
	}
	origins := map[string]string{}
	for _, p := range f.Providers {
		origins[p.Name] = OriginFile
	}
	env, err := routing.FromEnv(src.lookup, src.deps.Catalog)
	if err != nil {
		return nil, err
	}
	for _, p := range env.Providers {
		if _, named := origins[p.Name]; !named {
			f.Providers = append(f.Providers, p)
			origins[p.Name] = OriginEnv
		}
	}
	if len(f.Providers) > 0 {
		if err := f.Validate(); err != nil {
			return nil, err
		}
	}
	global, err := routing.Registrations(f.Providers, src.deps)
	if err != nil {
		return nil, err
	}
	for i := range global {
		global[i].Route.Origin = origins[global[i].Route.Name]
	}
	var stored []routestore.Route
	var version int64
	if src.store != nil {
		if stored, version, err = src.store.List(ctx); err != nil {
			return nil, fmt.Errorf("the route store: %w", err)
		}
	}
	own := map[string][]registry.Registration{}
	for _, r := range stored {
		reg, err := src.storedRoute(r)
		if err != nil {
			src.log.Error("a stored provider route cannot be used; the others are", "project", r.Project, "provider", r.Provider.Name, "error", err)
			continue
		}
		if r.Project == "" && origins[r.Provider.Name] != "" {
			src.log.Warn("a stored global route is shadowed by the providers file or an API key variable of the same name",
				"provider", r.Provider.Name, "defined_by", origins[r.Provider.Name])
			continue
		}
		if r.Project == "" {
			global = append(global, reg)
		} else {
			own[r.Project] = append(own[r.Project], reg)
		}
	}
	rs := &routeSet{global: registry.New(), projects: map[string]*registry.Registry{}, configured: origins}
	if err := register(rs.global, global); err != nil {
		return nil, err
	}
	for project, regs := range own {
		names := map[string]bool{}
		for _, r := range regs {
			names[r.Route.Name] = true
		}
		for _, g := range global {
			if !names[g.Route.Name] {
				regs = append(regs, g)
			}
		}
		rs.projects[project] = registry.New()
		if err := register(rs.projects[project], regs); err != nil {
			return nil, err
		}
	}
	src.seen, src.seenVersion = fp, version
	return rs, nil
}

// storedRoute builds the registration of a stored route.
func (src *routeSource) storedRoute(r routestore.Route) (registry.Registration, error) {
	if r.Err != nil {
		return registry.Registration{}, r.Err
	}
	if err := (&routing.File{Providers: []routing.Provider{r.Provider}}).Validate(); err != nil {
		return registry.Registration{}, err
	}
	regs, err := routing.Registrations([]routing.Provider{r.Provider}, src.deps)
	if err != nil {
		return registry.Registration{}, err
	}
	reg := regs[0]
	reg.Route.Project, reg.Route.Origin, reg.Route.KeyHint = r.Project, OriginStore, routestore.Mask(r.Provider.APIKey)
	return reg, nil
}

// register adds regs to reg, when there are any.
func register(reg *registry.Registry, regs []registry.Registration) error {
	if len(regs) == 0 {
		return nil
	}
	return reg.RegisterAll(regs...)
}

// fingerprint is what a change of the providers file or of one of its key
// files alters: each file's size and modification time, or its absence.
// The caller holds src.mu.
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
	if src.keyFiles.of != fp {
		src.keyFiles = keyFiles{of: fp}
		if f, err := routing.Load(src.file); err == nil {
			for _, p := range f.Providers {
				if p.APIKeyFile != "" {
					src.keyFiles.paths = append(src.keyFiles.paths, p.APIKeyFile)
				}
			}
		}
	}
	for _, path := range src.keyFiles.paths {
		fp += stamp(path)
	}
	return fp
}

// Reload builds the routes afresh from the providers file, the
// environment and the route store, and puts them in place at once: a
// request sees the old routes or the new ones, never a mix. When the file
// is invalid (or a key file it names is missing, or the store cannot be
// read), the routes in use stay, and the error is returned, logged, and
// reported by ListProviders until a reload succeeds.
func (s *Service) Reload() error {
	if s.source == nil {
		return errors.New("llm: this service was not built by Setup and has nothing to reload from")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rs, err := s.source.build(ctx)
	if err != nil {
		s.reloadErr.Store(&err)
		s.log.Error("the provider routes did not load; the routes in use stay", "file", s.source.file, "error", err)
		return err
	}
	s.reloadErr.Store(nil)
	old := s.routes.Swap(rs)
	s.log.Info("provider routes reloaded", "file", s.source.file, "routes", rs.global.Names(), "before", old.global.Names(),
		"projects_with_routes", len(rs.projects))
	return nil
}

// Watch reloads the routes when the providers file or a key file it names
// changes, when the route store's version moves (it looks every interval;
// DefaultWatchInterval when zero, DefaultStorePoll with a route store),
// and on SIGHUP, until ctx ends.
//
// It polls rather than using inotify (fsnotify): the file may not exist
// yet, editors replace it by renaming a new file over it, and the key
// files may live in other directories; a stat of a few files every two
// seconds sees all of that with no watch to re-arm, and costs nothing
// measurable. The store is polled for the same reason of simplicity: one
// indexed row a second per replica on PostgreSQL. On SQLite the row is
// read only when the stamps of the database's files moved since the last
// look (every commit writes them, whichever process made it): an idle
// server runs no query, and SQLite's code stays unmapped.
func (s *Service) Watch(ctx context.Context, interval time.Duration) {
	if s.source == nil {
		return
	}
	if interval <= 0 {
		interval = DefaultWatchInterval
		if s.source.store != nil {
			interval = DefaultStorePoll
		}
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
			if s.source.changed(ctx) {
				_ = s.Reload()
			}
		}
	}
}

// changed reports whether the files or the store differ from what the
// last build read.
func (src *routeSource) changed(ctx context.Context) bool {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.fingerprint() != src.seen {
		return true
	}
	if src.store == nil || (src.storeChanged != nil && !src.storeChanged()) {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	v, err := src.store.Version(ctx)
	if err != nil {
		src.log.Warn("the route store's version could not be read", "error", err)
		return false
	}
	return v != src.seenVersion
}

// defines reports whether name is a global route of the providers file or
// the environment, which the API cannot change, and which of the two.
func (rs *routeSet) defines(name string) (string, bool) {
	o, ok := rs.configured[name]
	return o, ok
}
