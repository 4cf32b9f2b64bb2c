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

// Release drops the process's mappings of its binary's read-only pages
// where the system allows it, and keeps later faults from mapping more
// than 64 KiB each. It costs 1 to 3 ms of CPU (splitting the areas, some
// 500, in one process_madvise call where the kernel takes it, and the
// page tables of some 40 MiB) and the page faults of the code that runs
// afterwards.
func Release() error {
	return dropBinaryPages()
}
