package store

// BackgroundCheckpoints is how many checkpoints the background
// checkpointer of a SQLite store on a file has run so far.
func BackgroundCheckpoints(s Store) int64 { return s.(*sqliteStore).ckpts.Load() }
