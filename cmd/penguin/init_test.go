package main

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/penguin-agent/penguin/internal/testkit/proctest"
)

// The package initialisation budget of the penguin binary. Go initialises
// every package of a binary when it starts, whichever subcommand runs, so
// what a package does at init (a syntax highlighter registering its
// lexers, a table parsed, a regular expression compiled) is paid by
// `penguin serve` and by every `penguin run` alike. Bytes and allocations
// are the same on every run of a build, busy machine or not, so they are
// the budget; the clock is bounded only loosely, since it moves tenfold on
// a loaded machine. Measured when the budget was set (docs/performance.md):
// about 2.0 MB and 11,200 allocations in all, a quarter of them
// goldmark's; Glamour had added 5.2 MB and 70,000. Eight regular
// expressions compiled at init in Penguin's own packages later brought it
// to 2.6 MB and 15,900 under the first, looser budget; compiled at first
// use, 2.2 MB and 11,400. Without goldmark's extension package (its
// regular expressions, 2,049 allocations), 2.0 MB and 9,440, where the
// budget was tightened to leave one of Penguin's packages' worth of
// allocations (initOwnAllocs) above it: what is left is dependencies'
// init that only dropping them avoids (docs/performance.md, twelfth
// round).
const (
	initBytesBudget  = 2 << 20 // 2 MiB
	initAllocsBudget = 9_700
	// initPackageBytes bounds one package, so that a new dependency
	// heavy at init is named even while the total has room for it.
	initPackageBytes = 384 << 10
	// initOwnAllocs bounds each of Penguin's own packages: the generated
	// protobuf code registering its descriptors makes about 200; one
	// regular expression such as `^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$`
	// compiled at init makes some 1,300.
	initOwnAllocs = 256
	// initClockBound is the sum of the packages' init clocks: about 10
	// ms on an idle machine.
	initClockBound = 2 * time.Second
)

// ownModule is the path of Penguin's module, whose packages have a
// tighter init budget than dependencies.
const ownModule = "github.com/penguin-agent/penguin"

// pkgInit is one package's line of GODEBUG=inittrace=1.
type pkgInit struct {
	pkg           string
	clock         time.Duration
	bytes, allocs int64
}

// parseInitTrace reads the init lines of a GODEBUG=inittrace=1 trace:
// "init PKG @T ms, CLOCK ms clock, BYTES bytes, ALLOCS allocs".
func parseInitTrace(trace string) ([]pkgInit, error) {
	var out []pkgInit
	for line := range strings.SplitSeq(trace, "\n") {
		if !strings.HasPrefix(line, "init ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 11 || f[6] != "clock," || f[8] != "bytes," || f[10] != "allocs" {
			return nil, fmt.Errorf("an init line of a form not known: %q", line)
		}
		ms, err1 := strconv.ParseFloat(f[4], 64)
		b, err2 := strconv.ParseInt(f[7], 10, 64)
		n, err3 := strconv.ParseInt(f[9], 10, 64)
		if err1 != nil || err2 != nil || err3 != nil {
			return nil, fmt.Errorf("an init line not parsed: %q", line)
		}
		out = append(out, pkgInit{pkg: f[1], clock: time.Duration(ms * float64(time.Millisecond)), bytes: b, allocs: n})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no init lines in %q", trace)
	}
	return out, nil
}

// TestInitBudget runs the built binary with GODEBUG=inittrace=1 and holds
// its package initialisation to the budget above, naming the heaviest
// packages when it is over.
func TestInitBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "version")
	cmd.Env = proctest.Env(t, "GODEBUG=inittrace=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("penguin version: %v\n%s", err, stderr.String())
	}
	inits, err := parseInitTrace(stderr.String())
	if err != nil {
		t.Fatal(err)
	}
	var total pkgInit
	for _, p := range inits {
		total.clock += p.clock
		total.bytes += p.bytes
		total.allocs += p.allocs
	}
	slices.SortFunc(inits, func(a, b pkgInit) int { return int(b.bytes - a.bytes) })
	var top strings.Builder
	for _, p := range inits[:min(10, len(inits))] {
		fmt.Fprintf(&top, "\n  %8d bytes %6d allocs %8v  %s", p.bytes, p.allocs, p.clock, p.pkg)
	}
	t.Logf("%d packages: %d bytes, %d allocations, %v at init; the heaviest:%s", len(inits), total.bytes, total.allocs, total.clock, top.String())
	if total.bytes > initBytesBudget || total.allocs > initAllocsBudget {
		t.Errorf("package init allocates %d bytes in %d allocations, over the budget of %d and %d: make the heaviest lazy (sync.OnceValue) or drop them:%s",
			total.bytes, total.allocs, initBytesBudget, initAllocsBudget, top.String())
	}
	if p := inits[0]; p.bytes > initPackageBytes {
		t.Errorf("%s allocates %d bytes at init, over the %d a package may", p.pkg, p.bytes, initPackageBytes)
	}
	for _, p := range inits {
		if strings.HasPrefix(p.pkg, ownModule+"/") && p.allocs > initOwnAllocs {
			t.Errorf("%s makes %d allocations at init, over the %d one of Penguin's packages may: compile or build it at first use (sync.OnceValue)",
				p.pkg, p.allocs, initOwnAllocs)
		}
	}
	if total.clock > initClockBound {
		t.Errorf("package init took %v, over %v even for a loaded machine", total.clock, initClockBound)
	}
}

// TestParseInitTrace: the parser takes the runtime's lines and refuses a
// form it does not know rather than reading it as zero.
func TestParseInitTrace(t *testing.T) {
	t.Parallel()
	trace := "init internal/bytealg @0.003 ms, 0.002 ms clock, 0 bytes, 0 allocs\n" +
		"other output\n" +
		"init github.com/x/y @1.2 ms, 3.5 ms clock, 4096 bytes, 12 allocs\n"
	got, err := parseInitTrace(trace)
	if err != nil {
		t.Fatal(err)
	}
	want := []pkgInit{{"internal/bytealg", 2 * time.Microsecond, 0, 0}, {"github.com/x/y", 3500 * time.Microsecond, 4096, 12}}
	if !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "no init here\n", "init pkg @1 ms, 2 ms clock, many bytes, 3 allocs\n", "init pkg @1 ms, 2 ms clock, 3 allocs, 4 bytes\n", "init pkg @1 ms, 2 ms clock\n"} {
		if _, err := parseInitTrace(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
