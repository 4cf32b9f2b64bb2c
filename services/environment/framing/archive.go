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
// head is the first half of the budget. The tail window, the rest, is a
// ring, so that each byte past the head is copied once, into place,
// however long the command goes on printing. Both are made of pooled
// blocks taken as they are first written, so that neither grows by
// copying, and a call that prints a lot reuses memory another call used
// instead of faulting in and clearing megabytes of fresh memory.
type archive struct {
	budget  int
	head    blocks // the first headCap bytes
	headLen int
	ring    blocks // the tail window, circular
	end     int    // where the next byte goes in ring
	wrapped bool   // ring is full, the oldest byte at end
	total   int64
}

func newArchive(budget int) *archive {
	tailCap := budget / 2
	return &archive{budget: budget, head: blocks{size: budget - tailCap}, ring: blocks{size: tailCap}}
}

// add appends text.
func (a *archive) add(text string) { appendArchive(a, text) }

// addBytes appends b, which it copies and does not keep.
func (a *archive) addBytes(b []byte) { appendArchive(a, b) }

// appendArchive is add and addBytes.
func appendArchive[T string | []byte](a *archive, text T) {
	a.total += int64(len(text))
	if a.headLen < a.head.size {
		n := min(len(text), a.head.size-a.headLen)
		writeBlocks(&a.head, a.headLen, text[:n])
		a.headLen += n
		text = text[n:]
	}
	if len(text) == 0 || a.ring.size == 0 {
		return
	}
	size := a.ring.size
	if len(text) >= size {
		writeBlocks(&a.ring, 0, text[len(text)-size:])
		a.end, a.wrapped = 0, true
		return
	}
	n := min(len(text), size-a.end)
	writeBlocks(&a.ring, a.end, text[:n])
	a.end += n
	if n < len(text) {
		a.end = len(text) - n
		writeBlocks(&a.ring, 0, text[n:])
		a.wrapped = true
	}
	if a.end == size {
		a.end, a.wrapped = 0, true
	}
}

// release gives the archive's blocks back; it is empty afterwards.
func (a *archive) release() {
	a.head.release()
	a.ring.release()
}

// archiveBlock is the size of an archive's blocks: as much as a call's
// first output took before blocks, so that a call printing a little uses
// no more.
const archiveBlock = 64 << 10

// archiveBlocks holds archive blocks between calls.
var archiveBlocks = sync.Pool{New: func() any { return new([archiveBlock]byte) }}

// blocks is a byte region of a fixed size, stored in archive blocks.
type blocks struct {
	size int
	b    []*[archiveBlock]byte // b[i] holds bytes from i*archiveBlock on; nil until written
}

// writeBlocks copies p into r from off on; off+len(p) must not pass
// r.size.
func writeBlocks[T string | []byte](r *blocks, off int, p T) {
	for len(p) > 0 {
		i, at := off/archiveBlock, off%archiveBlock
		for len(r.b) <= i {
			r.b = append(r.b, nil)
		}
		if r.b[i] == nil {
			r.b[i] = archiveBlocks.Get().(*[archiveBlock]byte)
		}
		n := copy(r.b[i][at:], p)
		p, off = p[n:], off+n
	}
}

// each calls f with the bytes of r from from to to, in order, one block's
// part at a time.
func (r *blocks) each(from, to int, f func([]byte)) {
	for from < to {
		i, at := from/archiveBlock, from%archiveBlock
		n := min(archiveBlock-at, to-from)
		f(r.b[i][at : at+n])
		from += n
	}
}

// byteAt returns r's byte at off.
func (r *blocks) byteAt(off int) byte { return r.b[off/archiveBlock][off%archiveBlock] }

// release puts r's blocks back into the pool.
func (r *blocks) release() {
	for _, b := range r.b {
		if b != nil {
			archiveBlocks.Put(b)
		}
	}
	r.b = nil
}

// Archives is where an environment keeps the full text of its truncated
// outputs: one directory, reached through a handle (os.Root) that its
// opener makes beneath a handle of its own (the scratch directory's), so
// that nothing done to the directory's path (replacing it, or a directory
// on its way, with a symbolic link) makes a save land elsewhere. The
// directory is made and opened at the first save: most environments never
// truncate an output. It keeps the directory within a byte budget: after
// each save, the oldest archives are removed until the rest fits.
// Environments that share the directory (the same label) share the
// budget. It is safe for concurrent use.
type Archives struct {
	dir   string // the directory's absolute path, for the paths shown
	open  func() (*os.Root, error)
	limit int64
	mu    sync.Mutex
}

// NewArchives keeps archives in the directory dir (an absolute path),
// within limit bytes. open makes the directory if need be and returns a
// handle of it; it is called at each save, and the caller keeps owning
// the handle.
func NewArchives(dir string, open func() (*os.Root, error), limit int64) *Archives {
	return &Archives{dir: filepath.Clean(dir), open: open, limit: limit}
}

// budget is the most one archive may hold.
func (s *Archives) budget() int {
	return int(min(int64(archiveBudget), s.limit))
}

// save writes a to a new private file and returns its absolute path.
func (s *Archives) save(a *archive, callID string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	root, err := s.open()
	if err != nil {
		return "", err
	}
	name := fmt.Sprintf("%s-%s.txt", time.Now().UTC().Format("20060102T150405.000000000"), safeName(callID))
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", err
	}
	var werr error
	write := func(b []byte) {
		if werr == nil {
			_, werr = f.Write(b)
		}
	}
	a.head.each(0, a.headLen, write)
	// The tail window: all of it once the ring wrapped, from its oldest
	// byte on.
	from, n := 0, a.end
	if a.wrapped {
		from, n = a.end, a.ring.size
	}
	if dropped := a.total - int64(a.headLen) - int64(n); dropped > 0 {
		// The window starts on a character's first byte.
		for n > 0 && !utf8.RuneStart(a.ring.byteAt(from)) {
			from, n, dropped = (from+1)%a.ring.size, n-1, dropped+1
		}
		write([]byte(fmt.Sprintf("\n[... %d bytes of the middle of the output are not kept ...]\n", dropped)))
	}
	a.ring.each(from, min(from+n, a.ring.size), write)
	a.ring.each(0, max(from+n-a.ring.size, 0), write)
	if err := f.Close(); werr == nil {
		werr = err
	}
	if werr != nil {
		_ = root.Remove(name)
		return "", werr
	}
	if err := s.prune(root, name); err != nil {
		return "", err
	}
	return filepath.ToSlash(filepath.Join(s.dir, name)), nil
}

// prune removes the oldest archives (by name, which starts with the time
// of the save) until the directory root fits the limit; keep is never
// removed.
func (s *Archives) prune(root *os.Root, keep string) error {
	d, err := root.Open(".")
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
		if err := root.Remove(f.name); err == nil || errors.Is(err, fs.ErrNotExist) {
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
