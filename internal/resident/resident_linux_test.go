package resident

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// area is one area of /proc/self/smaps.
type area struct {
	start, end uint64
	offset     uint64
	perms      string
	path       string
	rss        int  // KiB
	pmd        int  // KiB mapped by PMDs (FilePmdMapped)
	nohuge     bool // VmFlags has nh
}

// smapsAreas reads this process's areas from /proc/self/smaps.
func smapsAreas(t *testing.T) []area {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	var out []area
	num := func(s string, base int) uint64 {
		n, err := strconv.ParseUint(s, base, 64)
		if err != nil {
			t.Fatalf("smaps: %v", err)
		}
		return n
	}
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if lo, hi, ok := strings.Cut(f[0], "-"); ok && !strings.HasSuffix(f[0], ":") && len(f) >= 5 {
			a := area{start: num(lo, 16), end: num(hi, 16), offset: num(f[2], 16), perms: f[1]}
			if len(f) >= 6 {
				a.path = strings.TrimSuffix(strings.Join(f[5:], " "), " (deleted)")
			}
			out = append(out, a)
			continue
		}
		if len(out) == 0 {
			continue
		}
		a := &out[len(out)-1]
		switch f[0] {
		case "Rss:":
			a.rss = int(num(f[1], 10))
		case "FilePmdMapped:":
			a.pmd = int(num(f[1], 10))
		case "VmFlags:":
			a.nohuge = slices.Contains(f[1:], "nh")
		}
	}
	return out
}

// binaryAreas returns the areas of this process's binary's read-only
// segments.
func binaryAreas(t *testing.T) []area {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(smapsAreas(t), func(a area) bool {
		return a.path != exe || (a.perms != "r-xp" && a.perms != "r--p")
	})
}

// TestReleaseDropsTheBinarysPages checks on this test binary that Release
// unmaps what the process had of its binary: the code that ran before
// (the test framework, package init) is no longer counted, and the
// process goes on running. What runs after (the runtime, reading smaps)
// comes back, 64 KiB around each page, so in so small a binary a good
// part does.
func TestReleaseDropsTheBinarysPages(t *testing.T) {
	rss := func() (sum int) {
		for _, a := range binaryAreas(t) {
			sum += a.rss
		}
		return sum
	}
	before := rss()
	if err := Release(); err != nil {
		t.Fatal(err)
	}
	after := rss()
	t.Logf("the binary's read-only pages: %d KiB resident before Release, %d KiB after", before, after)
	if before == 0 || after > before*3/4 {
		t.Errorf("%d KiB of the binary resident after Release, from %d KiB: want a quarter less at least", after, before)
	}
}

// TestReleaseMapsNoLargeFolioWhole checks that after Release no area of
// the binary's read-only mappings is larger than a granule, so that no
// fault maps more than a granule whatever the page cache's folios, and
// that the areas alternate, so that the kernel does not merge them.
func TestReleaseMapsNoLargeFolioWhole(t *testing.T) {
	if err := Release(); err != nil {
		t.Fatal(err)
	}
	areas := binaryAreas(t)
	if len(areas) == 0 {
		t.Fatal("no read-only area of the binary in /proc/self/smaps")
	}
	for _, a := range areas {
		if a.end-a.start > granule || a.pmd != 0 {
			t.Fatalf("area %#x-%#x (%s, file offset %#x) of %d KiB, %d KiB of it mapped by PMDs: want at most %d KiB, none by PMDs",
				a.start, a.end, a.perms, a.offset, (a.end-a.start)>>10, a.pmd, granule>>10)
		}
		if odd := a.offset/granule%2 == 1; a.nohuge != odd {
			t.Fatalf("area %#x-%#x (file offset %#x): nh %v, want %v", a.start, a.end, a.offset, a.nohuge, odd)
		}
	}
	t.Logf("%d areas", len(areas))
}

// mapFile writes a file of fileSize zeros and maps size bytes of it from
// off, privately, with prot; the mapping goes when the test ends.
func mapFile(t *testing.T, fileSize, off, size, prot int) (string, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, make([]byte, fileSize), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mem, err := unix.Mmap(int(f.Fd()), int64(off), size, prot, unix.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(mem) })
	return path, mem
}

// TestSplitFollowsTheFile checks that split places the areas' bounds at
// multiples of the granule in the file, where the page cache's folios
// are aligned, for a mapping that starts between two.
func TestSplitFollowsTheFile(t *testing.T) {
	const off, size = 12 << 10, 400 << 10
	path, mem := mapFile(t, 512<<10, off, size, unix.PROT_READ)
	m := mapping{start: uintptr(unsafe.Pointer(&mem[0])), offset: off, perms: "r--p"}
	m.end = m.start + size
	if err := split([]mapping{m}); err != nil {
		t.Fatal(err)
	}
	var got []area
	for _, a := range smapsAreas(t) {
		if a.path == path {
			got = append(got, a)
		}
	}
	// File offsets 12-64 KiB, 64-128 (nh), 128-192, 192-256 (nh),
	// 256-320, 320-384 (nh), 384-412.
	want := []uint64{12 << 10, 64 << 10, 128 << 10, 192 << 10, 256 << 10, 320 << 10, 384 << 10}
	if len(got) != len(want) {
		t.Fatalf("%d areas, want %d: %+v", len(got), len(want), got)
	}
	for i, a := range got {
		if a.offset != want[i] || a.nohuge != (i%2 == 1) || a.start != uint64(m.start)+a.offset-off {
			t.Fatalf("area %d: %+v, want file offset %#x, nh %v", i, a, want[i], i%2 == 1)
		}
	}
	if last := got[len(got)-1]; last.end != uint64(m.end) {
		t.Fatalf("the last area ends at %#x, want %#x", last.end, m.end)
	}
}

// TestSplitInOneCall checks that split asks the kernel once for all its
// areas, not once an area, where the kernel takes the advice through
// process_madvise (Linux 6.13 on); the areas are the same either way
// (TestSplitFollowsTheFile).
func TestSplitInOneCall(t *testing.T) {
	const size = 1 << 20 // 16 granules, 8 of them advised
	_, mem := mapFile(t, size, 0, size, unix.PROT_READ)
	start := uintptr(unsafe.Pointer(&mem[0]))
	if err := processMadvise([]span{{start, granule}}, unix.MADV_NOHUGEPAGE); err != nil {
		t.Skipf("this kernel does not take MADV_NOHUGEPAGE through process_madvise: %v", err)
	}
	calls := 0
	defer func(f func(lo, hi uintptr, advice int) error) { adviseEach = f }(adviseEach)
	adviseEach = func(lo, hi uintptr, advice int) error {
		calls++
		return madvise(lo, hi, advice)
	}
	if err := split([]mapping{{start: start, end: start + size, perms: "r--p"}}); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("split made %d madvise calls, one an area; want one process_madvise call for all", calls)
	}
}

// TestReleaseKeepsWrittenPages checks that a read-only mapping holding
// pages the process wrote before it protected it (as the dynamic loader
// does with a binary's GOT) keeps them: dropped, they would read as the
// file again. It fails without the check of the areas' own pages.
func TestReleaseKeepsWrittenPages(t *testing.T) {
	path, mem := mapFile(t, 3<<12, 0, 3<<12, unix.PROT_READ|unix.PROT_WRITE)
	mem[1<<12] = 42 // a relocation, say
	if err := unix.Mprotect(mem, unix.PROT_READ); err != nil {
		t.Fatal(err)
	}
	if err := dropPages(path); err != nil {
		t.Fatal(err)
	}
	if mem[1<<12] != 42 {
		t.Fatalf("the written byte reads %d after the release, want 42", mem[1<<12])
	}
}

func TestReadOnlyMappings(t *testing.T) {
	maps := `00400000-00402000 r--p 00000000 fd:01 123 /usr/bin/penguin
00402000-01cfe000 r-xp 00002000 fd:01 123 /usr/bin/penguin
01cfe000-01d00000 r--p 018fe000 fd:01 123 /usr/bin/penguin
01d00000-03e4c000 r--p 01900000 fd:01 123 /usr/bin/penguin
03e4c000-03e4d000 r--p 03a4c000 fd:01 123 /usr/bin/penguin
03e4d000-03fbd000 rw-p 03a4d000 fd:01 123 /usr/bin/penguin
03fbd000-06232000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r-xp 00000000 fd:01 456 /usr/lib/libc.so.6
7f0000002000-7f0000003000 r--p 00000000 fd:01 789 /usr/bin/penguin old (deleted)
7f0000003000-7f0000004000 rw-p 00001000 fd:01 789 /usr/bin/penguin old (deleted)
`
	got, err := readOnlyMappings([]byte(maps), "/usr/bin/penguin")
	if err != nil {
		t.Fatal(err)
	}
	want := []mapping{
		{0x400000, 0x402000, 0, "r--p"},
		{0x402000, 0x1cfe000, 0x2000, "r-xp"},
		{0x1cfe000, 0x1d00000, 0x18fe000, "r--p"},
		{0x1d00000, 0x3e4c000, 0x1900000, "r--p"},
		{0x3e4c000, 0x3e4d000, 0x3a4c000, "r--p"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("mappings %x, want %x", got, want)
	}
	// The areas of the read-only data (as split leaves them) are one
	// mapping again.
	if j := joined(want); !slices.Equal(j, []mapping{want[0], want[1], {0x1cfe000, 0x3e4d000, 0x18fe000, "r--p"}}) {
		t.Fatalf("joined %x", j)
	}
	deleted, err := readOnlyMappings([]byte(maps), "/usr/bin/penguin old")
	if err != nil || !slices.Equal(deleted, []mapping{{0x7f0000002000, 0x7f0000003000, 0, "r--p"}}) {
		t.Fatalf("a deleted binary's mappings: %x, %v", deleted, err)
	}
}

// TestWithoutOwnPages checks that an area is left out when it holds a
// page the process wrote, and kept when its pages are the file's, or
// none is present.
func TestWithoutOwnPages(t *testing.T) {
	area := func(mem []byte) mapping {
		start := uintptr(unsafe.Pointer(&mem[0]))
		return mapping{start: start, end: start + uintptr(len(mem)), perms: "r--p"}
	}
	_, written := mapFile(t, 3<<12, 0, 3<<12, unix.PROT_READ|unix.PROT_WRITE)
	written[2<<12] = 1
	_, read := mapFile(t, 3<<12, 0, 3<<12, unix.PROT_READ)
	_ = read[1<<12]
	_, untouched := mapFile(t, 3<<12, 0, 3<<12, unix.PROT_READ)
	got, err := withoutOwnPages([]mapping{area(written), area(read), area(untouched)})
	if err != nil {
		t.Fatal(err)
	}
	if want := []mapping{area(read), area(untouched)}; !slices.Equal(got, want) {
		t.Fatalf("areas %x, want %x", got, want)
	}
}
