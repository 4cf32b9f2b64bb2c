package journal

import (
	"sync/atomic"
	"time"
)

// DelayAfterPublish has the writer pause for d after each batch it hands
// to the live buffer, until the returned function is called.
func DelayAfterPublish(d time.Duration) (restore func()) {
	f := func() { time.Sleep(d) }
	afterPublish.Store(&f)
	return func() { afterPublish.Store(nil) }
}

// SetMinLinger has the journals made from now on linger at least d, until
// the returned function is called.
func SetMinLinger(d time.Duration) (restore func()) {
	old := minLinger
	minLinger = d
	return func() { minLinger = old }
}

// CountWriterWakes counts each start of a writer and each wake-up of a
// writer that held its queue back, until the returned function is called.
func CountWriterWakes() (wakes *atomic.Int64, restore func()) {
	wakes = new(atomic.Int64)
	f := func() { wakes.Add(1) }
	writerWoken.Store(&f)
	return wakes, func() { writerWoken.Store(nil) }
}
