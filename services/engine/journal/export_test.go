package journal

import "time"

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
