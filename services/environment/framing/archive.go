package framing

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"
)

// archiveBudget is the most one call stores: one byte under 8 MiB, so that
// read_file stays within its scan cap when reading the archive back.
const archiveBudget = 8<<20 - 1

// archive keeps the full text of one call within a byte budget: all of it
// while it fits, then a head and a tail window with the middle dropped. The
// tail window is a ring of fixed size, so that each byte past the budget is
// copied once, into place, however long the command goes on printing.
type archive struct {
	budget  int
	head    []byte
	ring    []byte // the tail window once over budget: tailCap bytes, circular
	end     int    // where the next byte goes in ring
	wrapped bool   // ring holds tailCap bytes, the oldest at end
	tailCap int
	total   int64
	over    bool
}

// minArchiveGrowth is the least an archive's head grows by at a time.
const minArchiveGrowth = 64 << 10

func newArchive(budget int) *archive {
	return &archive{budget: budget, tailCap: budget / 2}
}

// add appends text.
func (a *archive) add(text string) { appendArchive(a, text) }

// addBytes appends b, which it copies and does not keep.
func (a *archive) addBytes(b []byte) { appendArchive(a, b) }

// appendArchive is add and addBytes.
func appendArchive[T string | []byte](a *archive, text T) {
	a.total += int64(len(text))
	if !a.over {
		if len(a.head)+len(text) <= a.budget {
			if need := len(a.head) + len(text); need > cap(a.head) {
				// Doubling, as append does only for small slices: a
				// head growing to megabytes by a quarter at a time
				// would be copied over and over.
				grown := make([]byte, len(a.head), min(max(2*cap(a.head), need, minArchiveGrowth), a.budget))
				copy(grown, a.head)
				a.head = grown
			}
			a.head = append(a.head, text...)
			return
		}
		// Over budget: keep the first half as the head; the rest of
		// what was kept and the text start the tail window.
		a.over = true
		headCap := a.budget - a.tailCap
		a.ring = make([]byte, a.tailCap)
		if len(a.head) < headCap {
			take := headCap - len(a.head)
			a.head = append(a.head, text[:take]...)
			text = text[take:]
		} else {
			rest := a.head[headCap:]
			a.head = a.head[:headCap:headCap]
			writeRing(a, rest)
		}
		writeRing(a, text)
		return
	}
	writeRing(a, text)
}

// writeRing adds b to the tail window, overwriting its oldest bytes.
func writeRing[T string | []byte](a *archive, b T) {
	if a.tailCap == 0 {
		return
	}
	if len(b) >= a.tailCap {
		copy(a.ring, b[len(b)-a.tailCap:])
		a.end, a.wrapped = 0, true
		return
	}
	n := copy(a.ring[a.end:], b)
	if n < len(b) {
		a.end = copy(a.ring, b[n:])
		a.wrapped = true
		return
	}
	a.end += n
	if a.end == a.tailCap {
		a.end, a.wrapped = 0, true
	}
}

// tail returns the tail window, oldest bytes first, in two parts.
func (a *archive) tail() (older, newer []byte) {
	if !a.wrapped {
		return nil, a.ring[:a.end]
	}
	return a.ring[a.end:], a.ring[:a.end]
}

// Archives is where an environment keeps the full text of its truncated
// outputs: one directory, held open as a handle (os.Root) from the
// environment's creation on, so that nothing done to the directory's path
// later (replacing it, or a directory on its way, with a symbolic link)
// makes a save land elsewhere. It keeps the directory within a byte
// budget: after each save, the oldest archives are removed until the rest
// fits. Environments that share the directory (the same label) share the
// budget. It is safe for concurrent use.
type Archives struct {
	dir   string // the handle's absolute path, for the paths shown
	root  *os.Root
	limit int64
	mu    sync.Mutex
}

// NewArchives keeps archives beneath root, whose name must be absolute,
// within limit bytes. The caller keeps owning root.
func NewArchives(root *os.Root, limit int64) *Archives {
	return &Archives{dir: filepath.Clean(root.Name()), root: root, limit: limit}
}

// budget is the most one archive may hold.
func (s *Archives) budget() int {
	return int(min(int64(archiveBudget), s.limit))
}

// save writes a to a new private file and returns its absolute path.
func (s *Archives) save(a *archive, callID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := fmt.Sprintf("%s-%s.txt", time.Now().UTC().Format("20060102T150405.000000000"), safeName(callID))
	f, err := s.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	var werr error
	write := func(b []byte) {
		if werr == nil {
			_, werr = f.Write(b)
		}
	}
	write(a.head)
	if a.over {
		older, newer := a.tail()
		// The window starts on a character's first byte.
		for len(older) > 0 && !utf8.RuneStart(older[0]) {
			older = older[1:]
		}
		if len(older) == 0 {
			for len(newer) > 0 && !utf8.RuneStart(newer[0]) {
				newer = newer[1:]
			}
		}
		dropped := a.total - int64(len(a.head)) - int64(len(older)) - int64(len(newer))
		write([]byte(fmt.Sprintf("\n[... %d bytes of the middle of the output are not kept ...]\n", dropped)))
		write(older)
		write(newer)
	}
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		_ = s.root.Remove(name)
		return "", werr
	}
	if err := s.prune(name); err != nil {
		return "", err
	}
	return filepath.ToSlash(filepath.Join(s.dir, name)), nil
}

// prune removes the oldest archives (by name, which starts with the time
// of the save) until the directory fits the limit; keep is never removed.
func (s *Archives) prune(keep string) error {
	d, err := s.root.Open(".")
	if err != nil {
		return err
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	type file struct {
		name string
		size int64
	}
	var files []file
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		files = append(files, file{e.Name(), info.Size()})
		total += info.Size()
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	for _, f := range files {
		if total <= s.limit {
			break
		}
		if f.name == keep {
			continue
		}
		if err := s.root.Remove(f.name); err == nil || errors.Is(err, fs.ErrNotExist) {
			total -= f.size
		}
	}
	return nil
}

// safeName keeps a call id usable as part of a file name.
func safeName(id string) string {
	var b strings.Builder
	for _, r := range id {
		if r < utf8.RuneSelf && (r == '-' || r == '_' || r == '.' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "call"
	}
	return b.String()
}

// errorCode reduces an archive failure to a short code for the visible
// note, which must not carry paths or raw messages.
func errorCode(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.ENOSPC:
			return "ENOSPC"
		case syscall.EACCES:
			return "EACCES"
		case syscall.EROFS:
			return "EROFS"
		case syscall.EDQUOT:
			return "EDQUOT"
		}
		return fmt.Sprintf("errno %d", int(errno))
	}
	if errors.Is(err, fs.ErrPermission) {
		return "EPERM"
	}
	return "EIO"
}
