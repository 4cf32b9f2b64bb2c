package journal

import "time"

// DelayAfterPublish has the writer pause for d after each batch it hands
// to the live buffer, until the returned function is called.
func DelayAfterPublish(d time.Duration) (restore func()) {
	f := func() { time.Sleep(d) }
	afterPublish.Store(&f)
	return func() { afterPublish.Store(nil) }
}
