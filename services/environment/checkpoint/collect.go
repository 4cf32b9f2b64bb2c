package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Retention bounds what a store keeps of a workspace's checkpoints, so
// that its disk use stays bounded however many turns run: undo reaches
// back as far as it does, and no further.
type Retention struct {
	// MaxCheckpoints is the most checkpoints kept. A turn takes two (one
	// at its start, one at its end), the end of one turn being the start
	// of the next when nothing changed in between.
	MaxCheckpoints int
	// MaxBytes bounds the disk that the kept checkpoints take, contents
	// and manifests; the newest checkpoint is kept whatever its size.
	MaxBytes int64
	// MaxAge is how long a checkpoint is kept after it was last taken.
	MaxAge time.Duration
}

// DefaultRetention is the retention a service uses for the fields it is
// not told: about a hundred turns, a gibibyte and a month per workspace.
var DefaultRetention = Retention{MaxCheckpoints: 200, MaxBytes: 1 << 30, MaxAge: 30 * 24 * time.Hour}

// WithDefaults returns r with each zero field taken from DefaultRetention,
// and an error for a bound that cannot work: fewer than two checkpoints
// cannot undo a turn, and a negative size or age bounds nothing.
func (r Retention) WithDefaults() (Retention, error) {
	if r.MaxCheckpoints == 0 {
		r.MaxCheckpoints = DefaultRetention.MaxCheckpoints
	}
	if r.MaxBytes == 0 {
		r.MaxBytes = DefaultRetention.MaxBytes
	}
	if r.MaxAge == 0 {
		r.MaxAge = DefaultRetention.MaxAge
	}
	switch {
	case r.MaxCheckpoints < 2:
		return r, fmt.Errorf("checkpoints to keep: %d is too few; a turn's undo needs two (its start and its end)", r.MaxCheckpoints)
	case r.MaxBytes < 0:
		return r, fmt.Errorf("checkpoint store size: %d is negative", r.MaxBytes)
	case r.MaxAge < 0:
		return r, fmt.Errorf("checkpoint age: %v is negative", r.MaxAge)
	}
	return r, nil
}

// String says what r keeps, for the messages of an undo that comes too
// late.
func (r Retention) String() string {
	age := r.MaxAge.String()
	if d := 24 * time.Hour; r.MaxAge%d == 0 {
		age = fmt.Sprintf("%d days", r.MaxAge/d)
	}
	return fmt.Sprintf("a workspace's last %d checkpoints, at most %d MiB of them, for %s", r.MaxCheckpoints, r.MaxBytes>>20, age)
}

// ErrCollected is wrapped when a checkpoint id names a checkpoint that
// the store's retention removed.
var ErrCollected = errors.New("the checkpoint was collected")

// maxTombstones bounds the ids of collected checkpoints that the store
// remembers to tell them apart from ids it never had.
const maxTombstones = 10_000

// manifestFile is one stored manifest, as collection sees it.
type manifestFile struct {
	id    string
	mtime time.Time
	size  int64
}

// Collect removes the checkpoints past r, oldest first, then every
// content that no remaining checkpoint refers to. It returns how many
// checkpoints it removed. Within the bounds it only lists the manifests;
// past one, it collects down to three quarters of each bound at once, so
// that the manifests it must read are read once in many turns rather than
// at every turn.
//
// A store that this process found within r less than relistEvery ago,
// and that nothing was added to since, is not listed again: the
// checkpoints of a turn that only read would otherwise list it twice.
func (s *Store) Collect(r Retention, now time.Time) (int, error) {
	dir := s.root.Name()
	if s.added == 0 && s.intact {
		if t := lastManifests.listedAt(dir, r); !t.IsZero() && !now.Before(t) && now.Sub(t) < relistEvery {
			return 0, nil
		}
	}
	lastManifests.setListed(dir, r, time.Time{})
	list, err := s.manifests()
	if err != nil {
		return 0, err
	}
	usage, known := s.usage()
	added := s.added
	usage += added
	s.added = 0
	over := !known || usage > r.MaxBytes || len(list) > r.MaxCheckpoints ||
		(len(list) > 0 && now.Sub(list[len(list)-1].mtime) > r.MaxAge)
	switch {
	case over:
	case added == 0:
		lastManifests.setListed(dir, r, now)
		return 0, nil // the usage on record holds
	default:
		err := s.setUsage(usage)
		if err == nil {
			lastManifests.setListed(dir, r, now)
		}
		return 0, err
	}
	maxCount, maxBytes := r.MaxCheckpoints-r.MaxCheckpoints/4, r.MaxBytes-r.MaxBytes/4
	keep := map[string]bool{} // contents the kept checkpoints refer to
	var drop []string
	var kept int
	var total int64
	stop := false
	for _, mf := range list {
		stop = stop || (kept > 0 && (kept >= maxCount || now.Sub(mf.mtime) > r.MaxAge))
		var m *Manifest
		if !stop {
			m, err = s.Load(mf.id)
		}
		if stop || err != nil {
			drop = append(drop, mf.id) // an unreadable manifest restores nothing
			continue
		}
		add, fresh := mf.size, []string{}
		for _, e := range m.Entries {
			if e.Kind == kindFile && !e.Large && !keep[e.Hash] {
				add += e.Size
				keep[e.Hash] = true
				fresh = append(fresh, e.Hash)
			}
		}
		if kept > 0 && total+add > maxBytes {
			for _, h := range fresh {
				delete(keep, h)
			}
			stop = true
			drop = append(drop, mf.id)
			continue
		}
		kept++
		total += add
	}
	for _, id := range drop {
		if err := s.root.Remove(manifestName(id)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return 0, err
		}
	}
	if err := s.remember(drop); err != nil {
		return 0, err
	}
	usage, err = s.sweep(keep, now)
	if err != nil {
		return 0, err
	}
	for _, mf := range list {
		if !contains(drop, mf.id) {
			usage += mf.size
		}
	}
	if err := s.setUsage(usage); err != nil {
		return len(drop), err
	}
	lastManifests.setListed(dir, r, now)
	return len(drop), nil
}

// relistEvery is how long a store found within its retention is not
// listed again while nothing is added to it: the age bound (days) is
// then applied that much later.
const relistEvery = time.Minute

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// manifests lists the stored manifests, newest first.
func (s *Store) manifests() ([]manifestFile, error) {
	entries, err := s.readDir("manifests")
	if err != nil {
		return nil, err
	}
	var out []manifestFile
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".json.gz")
		info, err := e.Info()
		if !ok || !idPattern().MatchString(id) || err != nil {
			continue
		}
		out = append(out, manifestFile{id: id, mtime: info.ModTime(), size: info.Size()})
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].mtime.Equal(out[j].mtime) {
			return out[i].mtime.After(out[j].mtime)
		}
		return out[i].id < out[j].id
	})
	return out, nil
}

// readDir lists a directory of the store.
func (s *Store) readDir(name string) ([]fs.DirEntry, error) {
	f, err := s.root.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.ReadDir(-1)
}

// sweep removes the contents not in keep, and files a crashed write left
// behind, and returns the bytes of the contents that remain.
func (s *Store) sweep(keep map[string]bool, now time.Time) (int64, error) {
	dirs, err := s.readDir("objects")
	if err != nil {
		return 0, err
	}
	var total int64
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := s.readDir("objects/" + d.Name())
		if err != nil {
			return 0, err
		}
		for _, f := range files {
			info, err := f.Info()
			if err != nil {
				continue
			}
			if keep[d.Name()+f.Name()] {
				total += info.Size()
				continue
			}
			if strings.Contains(f.Name(), ".tmp-") && now.Sub(info.ModTime()) < time.Minute {
				continue // a write under way in another process
			}
			if err := s.root.Remove("objects/" + d.Name() + "/" + f.Name()); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return 0, err
			}
		}
	}
	return total, nil
}

// usage is the store's size as last recorded; known is false when it was
// never recorded (a store older than collection).
func (s *Store) usage() (n int64, known bool) {
	b, err := s.root.ReadFile("usage")
	if err != nil {
		return 0, false
	}
	n, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

func (s *Store) setUsage(n int64) error {
	return s.write("usage", []byte(strconv.FormatInt(n, 10)))
}

// remember adds ids to the collected ones, keeping the last maxTombstones.
func (s *Store) remember(ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	b, _ := s.root.ReadFile("collected")
	lines := append(strings.Fields(string(b)), ids...)
	if len(lines) > maxTombstones {
		lines = lines[len(lines)-maxTombstones:]
	}
	return s.write("collected", []byte(strings.Join(lines, "\n")+"\n"))
}

// wasCollected reports whether id names a checkpoint that collection
// removed.
func (s *Store) wasCollected(id string) bool {
	b, _ := s.root.ReadFile("collected")
	return contains(strings.Fields(string(b)), id)
}
