package resident

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// granule is the largest span of the binary that one page fault maps:
// the kernel's fault-around window (64 KiB), which is what a page cache
// of small pages gives.
const granule = 64 << 10

// mapping is one mapping of the binary's read-only segments: its
// addresses and the offset in the file of its first byte.
type mapping struct {
	start, end uintptr
	offset     uint64
	perms      string
}

// dropBinaryPages drops the pages of the executable's read-only mappings.
func dropBinaryPages() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	return dropPages(exe)
}

// dropPages splits the read-only mappings of the file at path (for the
// executable, its text and read-only data, found in /proc/self/smaps)
// so that no large folio of the page cache is mapped whole, then unmaps
// their pages.
func dropPages(path string) error {
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return err
	}
	ms, err := readOnlyMappings(smaps, path)
	if err != nil {
		return err
	}
	if err := split(ms); err != nil {
		return err
	}
	for _, m := range ms {
		if err := madvise(m.start, m.end, unix.MADV_DONTNEED); err != nil {
			return err
		}
	}
	return nil
}

// split marks every other granule of ms (by file offset) MADV_NOHUGEPAGE,
// which splits each mapping into areas of one granule, alternately
// flagged so that the kernel never merges them back.
//
// Why: a file's page cache may hold large folios, up to 2 MiB (ext4 and
// XFS allocate them for a file written in large blocks, as the Go linker
// writes a binary), and a page fault in a mapping maps the whole folio
// around the page (with a PMD when the folio is 2 MiB and aligned, with
// PTEs otherwise) whenever the folio lies within one area of the mapping.
// MADV_NOHUGEPAGE over the whole mapping, or prctl(PR_SET_THP_DISABLE)
// (which every child would inherit, user commands included), refuses the
// PMD but not the PTEs: measured on Linux 6.18, one read in a 2 MiB folio
// made 2 MiB resident either way. An area of one granule holds no larger
// folio whole, so a fault maps at most a granule, as fault-around does
// with small pages. Which flag tells the areas apart does not matter;
// no-huge-page says what is wanted and changes nothing else (not the
// readahead, as MADV_RANDOM would, nor core dumps).
func split(ms []mapping) error {
	for _, m := range ms {
		// at is the address of the byte at offset off of the file.
		at := func(off uint64) uintptr { return m.start + uintptr(off-m.offset) }
		end := m.offset + uint64(m.end-m.start)
		for g := m.offset / granule; g*granule < end; g++ {
			if g%2 == 0 {
				continue
			}
			lo, hi := at(max(g*granule, m.offset)), at(min((g+1)*granule, end))
			if err := madvise(lo, hi, unix.MADV_NOHUGEPAGE); err != nil {
				return err
			}
		}
	}
	return nil
}

// madvise gives advice on the addresses from lo to hi.
func madvise(lo, hi uintptr, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, uintptr(advice)); errno != 0 {
		return fmt.Errorf("resident: madvise %#x-%#x: %w", lo, hi, errno)
	}
	return nil
}

// readOnlyMappings returns the mappings of path in smaps (the format of
// /proc/PID/smaps) that are neither writable nor shared, and hold only
// pages of the file: the binary's text and read-only data. The areas of
// one segment that split made are joined into one mapping again.
//
// An area that holds pages of its own (anonymous or swapped out) is
// left out: the process wrote them before it made them read-only. In a
// dynamically linked binary that is the relocation read-only segment
// (PT_GNU_RELRO: the GOT, the dynamic section), which the loader fills
// in and then protects; dropping it brought back the file's zeros, and
// the first call through the PLT of a C function not bound yet (munmap,
// which the execution tracer is the first to call) jumped to address 0.
func readOnlyMappings(smaps []byte, path string) ([]mapping, error) {
	var out []mapping
	var cur *mapping // the area being read, if one of path's read-only ones
	var own bool     // whether cur holds pages of its own
	end := func() {
		if cur == nil || own {
			return
		}
		if n := len(out); n > 0 && out[n-1].end == cur.start && out[n-1].perms == cur.perms &&
			out[n-1].offset+uint64(out[n-1].end-out[n-1].start) == cur.offset {
			out[n-1].end = cur.end
			return
		}
		out = append(out, *cur)
	}
	sc := bufio.NewScanner(bytes.NewReader(smaps))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if strings.HasSuffix(f[0], ":") {
			// A field of the area: "Anonymous:   4 kB".
			if cur != nil && len(f) == 3 && (f[0] == "Anonymous:" || f[0] == "Swap:") && f[1] != "0" {
				own = true
			}
			continue
		}
		// An area: address perms offset dev inode path
		end()
		cur, own = nil, false
		if len(f) < 6 || strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)") != path {
			continue
		}
		if perms := f[1]; perms != "r-xp" && perms != "r--p" {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("resident: bad smaps line %q", sc.Text())
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		stop, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || stop <= start {
			return nil, fmt.Errorf("resident: bad smaps line %q", sc.Text())
		}
		cur = &mapping{start: uintptr(start), end: uintptr(stop), offset: off, perms: f[1]}
	}
	end()
	return out, sc.Err()
}
