// Package resident gives back, once a server is built and before it
// serves, the memory its start-up used and no longer needs, so that what
// stays resident at rest is what serving uses.
//
// What is resident after start-up and unused by serving is mostly pages
// of the binary that ran or were read once: package init, flag parsing,
// the set-up of each service. The kernel maps a file 64 KiB around each
// page a process touches, and a large folio of the page cache whole (up
// to 2 MiB, with one PMD when it is aligned), so code spread over many
// packages brings in most of the binary's text and read-only data, and
// those mappings stay until the process ends. On Linux, [Release] first
// splits the binary's read-only segments (its text and read-only data)
// into areas of 64 KiB, so that from then on no fault maps more than
// 64 KiB, whatever the folios of the page cache; then it unmaps their
// pages (madvise MADV_DONTNEED): the pages stay in the page cache,
// shared with every process of the binary, and a page the server touches
// again is mapped again on its first use, from memory. Writable segments
// are left alone (their pages may have been written), and so is a
// read-only area with pages the process wrote before it protected them
// (a dynamically linked binary's relocations: its GOT).
//
// The heap start-up dropped is not collected here: a forced collection
// and scavenge (debug.FreeOSMemory) took about 10 ms of CPU at start for
// 0.5 MiB, against the 30 ms budget of a cold start; the runtime returns
// it in the background.
package resident

import "runtime/debug"

// startGCFactor is how much HoldCollection raises the garbage
// collector's target: with GOGC's default of 100, from the runtime's
// first collection at a heap of 4 MiB to one at 16 MiB.
const startGCFactor = 4

// HoldCollection puts off the garbage collector's first cycles while a
// server starts, and returns what brings its target back (GOGC, or what
// debug.SetGCPercent set before), which the server calls once it is
// ready (assemble calls it a second after); resume may be called more
// than once.
//
// A server's start-up allocates some 3 to 5 MiB beyond its package
// initialization's 2, and the runtime's first collection is due at
// 4 MiB: before ready, at one cycle's cost in page faults, which on a
// machine whose faults cost 12 to 20 µs each is the cost that counts. A
// first cycle touches pages nothing else does: a block of the span sets
// (4 KiB) for each size class in use, some 260 of them, the collector's
// own state, the scans of the data segments and the stacks. Measured on
// a new home (docs/performance.md, fourteenth round), a start with it
// took 173 fewer page faults to ready, and its anonymous memory at ready
// was 0.7 MiB smaller, not larger: the garbage the first cycle would
// have freed for reuse is less than what the cycle touches. The target
// is raised, not the collector turned off, so that a start-up that
// allocates more (a large home's sessions resumed) is still collected,
// at four times the usual heap.
func HoldCollection() (resume func()) {
	old := debug.SetGCPercent(100 * startGCFactor)
	if old != 100 {
		// GOGC set otherwise: off (negative) stays off.
		debug.SetGCPercent(max(old*startGCFactor, old))
	}
	return func() { debug.SetGCPercent(old) }
}

// Release drops the process's mappings of its binary's read-only pages
// where the system allows it, and keeps later faults from mapping more
// than 64 KiB each. It costs 1 to 3 ms of CPU (splitting the areas, some
// 500, in one process_madvise call where the kernel takes it, and the
// page tables of some 40 MiB) and the page faults of the code that runs
// afterwards.
func Release() error {
	return dropBinaryPages()
}
