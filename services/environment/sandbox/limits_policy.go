package sandbox

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits bound what the commands of one environment use together. Zero
// fields mean the defaults of DefaultLimits; a negative Pids, Memory or
// FileSize means no limit.
type Limits struct {
	// Pids bounds the processes and threads alive at once (pids.max), so
	// a fork storm stops at it.
	Pids int64
	// Memory bounds the memory in bytes, page cache and the files in the
	// environment's /tmp included (memory.max; on cgroup v1
	// memory.limit_in_bytes and, with swap accounting, memsw). Beyond it
	// the kernel reclaims, then kills a process of the environment.
	Memory int64
	// CPUWeight is the environment's share of CPU time when the CPUs are
	// contended, from 1 to 10000; 100 is what any other process gets
	// (cpu.weight; cpu.shares = weight × 1024 / 100 on cgroup v1).
	CPUWeight int64
	// FileSize bounds, in bytes, each file a command writes
	// (RLIMIT_FSIZE): a write beyond it fails with EFBIG after SIGXFSZ.
	FileSize int64
	// Tmp bounds, in bytes, the environment's /tmp (a tmpfs of its own,
	// whose pages also count against Memory).
	Tmp int64
}

// DefaultLimits are the limits of an environment whose configuration sets
// none: generous for builds and test suites, small enough that one
// runaway environment leaves a host and its other environments working.
func DefaultLimits() Limits {
	return Limits{
		Pids:      1024,
		Memory:    4 << 30,
		CPUWeight: 100,
		FileSize:  4 << 30,
		Tmp:       1 << 30,
	}
}

// withDefaults fills in the zero fields from DefaultLimits.
func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	for _, f := range []struct{ v, d *int64 }{{&l.Pids, &d.Pids}, {&l.Memory, &d.Memory}, {&l.CPUWeight, &d.CPUWeight}, {&l.FileSize, &d.FileSize}, {&l.Tmp, &d.Tmp}} {
		if *f.v == 0 {
			*f.v = *f.d
		}
	}
	return l
}

// validate checks the ranges the kernel accepts.
func (l Limits) validate() error {
	l = l.withDefaults()
	if l.CPUWeight < 1 || l.CPUWeight > 10000 {
		return fmt.Errorf("CPU weight %d is outside 1..10000", l.CPUWeight)
	}
	if l.Tmp < 0 {
		return fmt.Errorf("the /tmp size %d is negative", l.Tmp)
	}
	if l.Memory > 0 && l.Memory < 16<<20 {
		return fmt.Errorf("memory limit %d is below 16 MiB: not even a shell would start", l.Memory)
	}
	if l.Pids > 0 && l.Pids < 8 {
		return fmt.Errorf("process limit %d is below 8: not even a shell and its pipeline would start", l.Pids)
	}
	return nil
}

// String says the limits as the tool output reports them.
func (l Limits) String() string {
	l = l.withDefaults()
	return fmt.Sprintf("%s processes, %s of memory, CPU weight %d, files up to %s, /tmp up to %s",
		count(l.Pids), size(l.Memory), l.CPUWeight, size(l.FileSize), size(l.Tmp))
}

func count(n int64) string {
	if n < 0 {
		return "unlimited"
	}
	return strconv.FormatInt(n, 10)
}

// size prints a byte count in the largest binary unit that divides it.
func size(n int64) string {
	switch {
	case n < 0:
		return "unlimited"
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	default:
		return fmt.Sprintf("%d bytes", n)
	}
}

// LimitEvents count how often an environment's commands ran into its
// limits since it was created.
type LimitEvents struct {
	// OOMKills is how many processes the kernel killed for want of
	// memory within the limit.
	OOMKills int64
	// PidsRefused is how many forks failed at the process limit.
	PidsRefused int64
}

// Describe says, for the tool output, what happened between before and
// e, or "" when nothing did.
func (e LimitEvents) Describe(before LimitEvents, l Limits) string {
	l = l.withDefaults()
	var parts []string
	if n := e.OOMKills - before.OOMKills; n > 0 {
		parts = append(parts, fmt.Sprintf("the environment's memory limit (%s) was reached: the kernel killed %d process(es)", size(l.Memory), n))
	}
	if n := e.PidsRefused - before.PidsRefused; n > 0 {
		parts = append(parts, fmt.Sprintf("the environment's process limit (%s) was reached: %d fork(s) failed", count(l.Pids), n))
	}
	if len(parts) == 0 {
		return ""
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
