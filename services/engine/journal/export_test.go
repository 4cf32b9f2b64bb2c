package journal

import "time"

// DelayAfterPublish has the writer pause for d after each batch it hands
// to the live buffer, until the returned function is called.
func DelayAfterPublish(d time.Duration) (restore func()) {
	f := func() { time.Sleep(d) }
	afterPublish.Store(&f)
	return func() { afterPublish.Store(nil) }
}

// HoldClosing has the journals made from now on hold the model's messages
// and token usage for up to d, until the returned function is called.
func HoldClosing(d time.Duration) (restore func()) {
	old := closingHold
	closingHold = d
	return func() { closingHold = old }
}
