//go:build unix

package environment_test

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// cpuTime is the CPU time (user and system) of this process and of its
// reaped descendants so far.
func cpuTime(b *testing.B) time.Duration {
	return rusageTime(b, unix.RUSAGE_SELF, unix.RUSAGE_CHILDREN)
}

// selfCPU is the CPU time (user and system) of this process so far.
func selfCPU(b *testing.B) time.Duration { return rusageTime(b, unix.RUSAGE_SELF) }

// rusageTime is the CPU time (user and system) so far of each of who.
func rusageTime(b *testing.B, who ...int) time.Duration {
	var total time.Duration
	for _, who := range who {
		var ru unix.Rusage
		if err := unix.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}
