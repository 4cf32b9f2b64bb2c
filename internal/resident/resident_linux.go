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

// dropBinaryPages unmaps the pages of the binary's read-only mappings
// (its text and read-only data), found in /proc/self/maps by the path of
// the executable.
func dropBinaryPages() error {
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return err
	}
	ranges, err := readOnlyRanges(maps, exe)
	if err != nil {
		return err
	}
	for _, r := range ranges {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_DONTNEED); errno != 0 {
			return fmt.Errorf("resident: madvise %#x-%#x: %w", r[0], r[1], errno)
		}
	}
	return nil
}

// readOnlyRanges returns the address ranges of the mappings of path in
// maps (the format of /proc/PID/maps) that are neither writable nor
// shared: the binary's text and read-only data.
func readOnlyRanges(maps []byte, path string) ([][2]uintptr, error) {
	var out [][2]uintptr
	sc := bufio.NewScanner(bytes.NewReader(maps))
	for sc.Scan() {
		// address perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)") != path {
			continue
		}
		if perms := f[1]; perms != "r-xp" && perms != "r--p" {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("resident: bad maps line %q", sc.Text())
		}
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil || end <= start {
			return nil, fmt.Errorf("resident: bad maps line %q", sc.Text())
		}
		out = append(out, [2]uintptr{uintptr(start), uintptr(end)})
	}
	return out, sc.Err()
}
