package store

import "github.com/penguin-agent/penguin/internal/dirstamp"

// ChangeChecker is a store that can tell, without a query, whether its
// database may have changed: a SQLite file, which every commit writes
// (its write-ahead log), whichever process made the commit. A poller of
// the store (the schedules' tick) asks it first and runs its queries only
// when something may have changed, so an idle server runs none. A store
// of a database that other machines write (PostgreSQL) is no
// ChangeChecker.
type ChangeChecker interface {
	// ChangeCheck returns a check for one poller: each call reports
	// whether the database may have changed since the previous call, the
	// first call always. Nil when the store cannot tell (in memory).
	ChangeCheck() func() bool
}

// ChangeCheck implements ChangeChecker with the stamps of the database
// file and its WAL (dirstamp.Files).
func (s *sqliteStore) ChangeCheck() func() bool {
	if s.path == "" {
		return nil
	}
	return dirstamp.NewFiles(s.path, s.path+"-wal").Changed
}
