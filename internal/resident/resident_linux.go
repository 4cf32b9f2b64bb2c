package resident

import (
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"unsafe"

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
// executable, its text and read-only data, found in /proc/self/maps)
// so that no large folio of the page cache is mapped whole, then unmaps
// their pages.
func dropPages(path string) error {
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	ms, err := readOnlyMappings(maps, path)
	if err != nil {
		return err
	}
	if ms, err = withoutOwnPages(ms); err != nil {
		return err
	}
	ms = joined(ms)
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
	var areas []span
	for _, m := range ms {
		// at is the address of the byte at offset off of the file.
		at := func(off uint64) uintptr { return m.start + uintptr(off-m.offset) }
		end := m.offset + uint64(m.end-m.start)
		for g := m.offset / granule; g*granule < end; g++ {
			if g%2 == 0 {
				continue
			}
			lo, hi := at(max(g*granule, m.offset)), at(min((g+1)*granule, end))
			areas = append(areas, span{lo, hi - lo})
		}
	}
	return adviseAll(areas, unix.MADV_NOHUGEPAGE)
}

// adviseAll gives advice on every area of areas. It asks the kernel in
// one process_madvise call per 1,024 areas (UIO_MAXIOV) when the kernel
// takes that advice from a process for itself (Linux 6.13 on), and in one
// madvise call per area otherwise. The kernel then takes the process's
// memory map lock once rather than once an area: the split of a
// server's binary, about 500 areas, is one call instead of 500, and took
// 0.85 to 0.93 ms of CPU instead of 2.0 to 2.4 for 693 areas (measured
// on Linux 6.18). Advice is idempotent, so the areas a failed call
// advised are advised again by the fallback.
func adviseAll(areas []span, advice int) error {
	if processMadvise(areas, advice) == nil {
		return nil
	}
	for _, a := range areas {
		if err := adviseEach(a.base, a.base+a.len, advice); err != nil {
			return err
		}
	}
	return nil
}

// span is an area of memory, laid out as the kernel's struct iovec.
type span struct{ base, len uintptr }

// uioMaxIOV is the most areas one process_madvise call takes.
const uioMaxIOV = 1024

// processMadvise gives advice on areas of this process through
// process_madvise(2), failing when the kernel does not take it (before
// Linux 5.10 there is no such call; before 6.13 it takes only the advice
// meant for other processes) or advises less than all of them.
func processMadvise(areas []span, advice int) error {
	pidfd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return err
	}
	defer unix.Close(pidfd)
	for len(areas) > 0 {
		batch := areas[:min(len(areas), uioMaxIOV)]
		var want uintptr
		for _, a := range batch {
			want += a.len
		}
		done, _, errno := unix.Syscall6(unix.SYS_PROCESS_MADVISE, uintptr(pidfd), uintptr(unsafe.Pointer(&batch[0])),
			uintptr(len(batch)), uintptr(advice), 0, 0)
		switch {
		case errno != 0:
			return errno
		case done != want:
			return fmt.Errorf("resident: process_madvise advised %d bytes of %d", done, want)
		}
		areas = areas[len(batch):]
	}
	return nil
}

// adviseEach is madvise, one area at a time: what adviseAll falls back
// to (a variable so that a test can count its calls).
var adviseEach = madvise

// madvise gives advice on the addresses from lo to hi.
func madvise(lo, hi uintptr, advice int) error {
	if _, _, errno := unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, uintptr(advice)); errno != 0 {
		return fmt.Errorf("resident: madvise %#x-%#x: %w", lo, hi, errno)
	}
	return nil
}

// readOnlyMappings returns the areas of path in maps (the format of
// /proc/PID/maps) that are neither writable nor shared: the binary's
// text and read-only data, one entry per area, in the order of maps.
func readOnlyMappings(maps []byte, path string) ([]mapping, error) {
	var out []mapping
	for line := range strings.Lines(string(maps)) {
		// address perms offset dev inode path
		f := strings.Fields(line)
		if len(f) < 6 || strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)") != path {
			continue
		}
		if perms := f[1]; perms != "r-xp" && perms != "r--p" {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("resident: bad maps line %q", line)
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		stop, err2 := strconv.ParseUint(hi, 16, 64)
		off, err3 := strconv.ParseUint(f[2], 16, 64)
		if err1 != nil || err2 != nil || err3 != nil || stop <= start {
			return nil, fmt.Errorf("resident: bad maps line %q", line)
		}
		out = append(out, mapping{start: uintptr(start), end: uintptr(stop), offset: off, perms: f[1]})
	}
	return out, nil
}

// joined joins the areas of one segment that split made (adjacent, with
// the same permissions, following each other in the file) into one
// mapping again.
func joined(ms []mapping) []mapping {
	var out []mapping
	for _, m := range ms {
		if n := len(out); n > 0 && out[n-1].end == m.start && out[n-1].perms == m.perms &&
			out[n-1].offset+uint64(out[n-1].end-out[n-1].start) == m.offset {
			out[n-1].end = m.end
			continue
		}
		out = append(out, m)
	}
	return out
}

// Bits of an entry of /proc/PID/pagemap (the kernel's
// admin-guide/mm/pagemap): the page is present in memory, or swapped
// out; a present page is a page of a file (or shared anonymous memory).
const (
	pagePresent = 1 << 63
	pageSwapped = 1 << 62
	pageFile    = 1 << 61
)

// withoutOwnPages leaves out of ms the areas that hold pages of their own
// (anonymous, present or swapped out, as /proc/self/pagemap tells): the
// process wrote them before it made them read-only. In a dynamically
// linked binary that is the relocation read-only segment (PT_GNU_RELRO:
// the GOT, the dynamic section), which the loader fills in and then
// protects; dropping it brought back the file's zeros, and the first call
// through the PLT of a C function not bound yet (munmap, which the
// execution tracer is the first to call) jumped to address 0. Pages a
// debugger or a uprobe wrote into the text are such pages too.
//
// pagemap reads the page tables of the areas asked about only, where
// /proc/self/smaps (which says the same in its Anonymous and Swap
// fields) walks every area of the process: 1.3 to 5 ms of a server's
// start, against a fraction of a millisecond.
func withoutOwnPages(ms []mapping) ([]mapping, error) {
	f, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pageSize := uintptr(os.Getpagesize())
	buf := make([]byte, 8<<10) // the entries of 4 MiB of 4 KiB pages
	out := ms[:0:0]
areas:
	for _, m := range ms {
		for page := m.start / pageSize; page < m.end/pageSize; {
			n := min(int(m.end/pageSize-page)*8, len(buf))
			if _, err := f.ReadAt(buf[:n], int64(page)*8); err != nil {
				return nil, fmt.Errorf("resident: pagemap: %w", err)
			}
			for i := 0; i < n; i += 8 {
				e := binary.NativeEndian.Uint64(buf[i:])
				if e&(pagePresent|pageSwapped) != 0 && e&pageFile == 0 {
					continue areas
				}
			}
			page += uintptr(n / 8)
		}
		out = append(out, m)
	}
	return out, nil
}
