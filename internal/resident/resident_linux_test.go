package resident

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// binaryRSS sums, in KiB, the resident pages of this process's mappings
// of its binary's read-only segments, from /proc/self/smaps.
func binaryRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	sum, ours := 0, false
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			ours = len(f) >= 6 && f[5] == exe && (f[1] == "r-xp" || f[1] == "r--p")
		case ours && len(f) == 3 && f[0] == "Rss:":
			n, err := strconv.Atoi(f[1])
			if err != nil {
				t.Fatal(err)
			}
			sum += n
		}
	}
	return sum
}

// TestReleaseDropsTheBinarysPages checks on this test binary that Release
// unmaps what the process had of its binary: the code that ran before
// (the test framework, package init) is no longer counted, and the
// process goes on running. What runs after (the runtime, reading smaps)
// comes back, 64 KiB around each page, so in so small a binary a good
// part does.
func TestReleaseDropsTheBinarysPages(t *testing.T) {
	before := binaryRSS(t)
	if err := Release(); err != nil {
		t.Fatal(err)
	}
	after := binaryRSS(t)
	t.Logf("the binary's read-only pages: %d KiB resident before Release, %d KiB after", before, after)
	if before == 0 || after > before*3/4 {
		t.Errorf("%d KiB of the binary resident after Release, from %d KiB: want a quarter less at least", after, before)
	}
}

func TestReadOnlyRanges(t *testing.T) {
	maps := `00400000-00402000 r--p 00000000 fd:01 123 /usr/bin/penguin
00402000-01cfe000 r-xp 00002000 fd:01 123 /usr/bin/penguin
01cfe000-03e4c000 r--p 018fe000 fd:01 123 /usr/bin/penguin
03e4d000-03fbd000 rw-p 03a4d000 fd:01 123 /usr/bin/penguin
03fbd000-06232000 rw-p 00000000 00:00 0
7f0000000000-7f0000001000 r-xp 00000000 fd:01 456 /usr/lib/libc.so.6
7f0000002000-7f0000003000 r--p 00000000 fd:01 789 /usr/bin/penguin old (deleted)
`
	got, err := readOnlyRanges([]byte(maps), "/usr/bin/penguin")
	if err != nil {
		t.Fatal(err)
	}
	want := [][2]uintptr{{0x400000, 0x402000}, {0x402000, 0x1cfe000}, {0x1cfe000, 0x3e4c000}}
	if len(got) != len(want) {
		t.Fatalf("ranges %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ranges %x, want %x", got, want)
		}
	}
	deleted, err := readOnlyRanges([]byte(maps), "/usr/bin/penguin old")
	if err != nil || len(deleted) != 1 || deleted[0] != [2]uintptr{0x7f0000002000, 0x7f0000003000} {
		t.Fatalf("a deleted binary's ranges: %x, %v", deleted, err)
	}
}
